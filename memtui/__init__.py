"""memtui: will this fine-tune fit on these GPUs, and is my running job inside its budget?"""

__version__ = "0.1.0"
