"""The vision towers and projectors multimodal checkpoints hold beside their text decoder,
counted parameter by parameter as transformers builds them (5.24; tests build the real
modules on the meta device and compare).

A text fine-tune of such a checkpoint loads them all: `AutoModelForCausalLM` maps `gemma3`
to Gemma3ForConditionalGeneration from transformers 4.51 (4.50 mapped it to
Gemma3ForCausalLM; models/auto/modeling_auto.py MODEL_FOR_CAUSAL_LM_MAPPING_NAMES), and
Mistral 3 checkpoints load as Mistral3ForConditionalGeneration. Their parameters require
gradients like the decoder's, so a full fine-tune trains them; a text-only batch never runs
them (Gemma3Model.forward and Mistral3Model.forward call the vision tower only for
pixel_values), so they add weights, gradients and optimizer state but no activations.
"""

from __future__ import annotations

from memtui.estimator.architecture import Tensor, Tower, TowerLinear


def _norm(name: str, width: int, count: int, *, bias: bool) -> list[Tensor]:
    # nn.LayerNorm has a weight and a bias; an RMSNorm only a weight
    out = [Tensor(f"{name}.weight", (width,), count, "tower", False)]
    if bias:
        out.append(Tensor(f"{name}.bias", (width,), count, "tower", False))
    return out


def siglip_gemma3(
    *, hidden: int, intermediate: int, layers: int, channels: int, patch: int, image: int,
    pooling_head: bool, text_hidden: int,
) -> Tower:  # fmt: skip
    """Gemma 3's SigLIP vision tower and Gemma3MultiModalProjector.

    modeling_siglip.py SiglipVisionTransformer: SiglipVisionEmbeddings (a patch Conv2d with
    bias, one learned position per patch, (image / patch)^2), SiglipEncoderLayer per layer
    (q/k/v/out_proj h x h with bias, layer_norm1/2, SiglipMLP fc1/fc2 with bias),
    post_layernorm, and with vision_use_head SiglipMultiheadAttentionPoolingHead (a probe,
    nn.MultiheadAttention: in_proj (3h x h) a bare parameter, out_proj an nn.Linear; a
    LayerNorm; an MLP). modeling_gemma3.py Gemma3MultiModalProjector: mm_input_projection_weight
    (vision h x text h, a bare nn.Parameter) and mm_soft_emb_norm (Gemma3RMSNorm of vision h).
    """
    h, f = hidden, intermediate
    linears = [
        *(TowerLinear(name, h, h, True, layers) for name in ("q_proj", "k_proj", "v_proj")),
        TowerLinear("out_proj", h, h, True, layers),
        TowerLinear("fc1", h, f, True, layers),
        TowerLinear("fc2", f, h, True, layers),
    ]
    other = [
        Tensor("patch_embedding.weight", (h, channels, patch, patch), 1, "tower", False),
        Tensor("patch_embedding.bias", (h,), 1, "tower", False),
        Tensor("position_embedding.weight", ((image // patch) ** 2, h), 1, "tower", False),
        *_norm("layer_norm", h, 2 * layers, bias=True),
        *_norm("post_layernorm", h, 1, bias=True),
    ]
    if pooling_head:
        linears += [TowerLinear("out_proj", h, h, True, 1), TowerLinear("fc1", h, f, True, 1),
                    TowerLinear("fc2", f, h, True, 1)]  # fmt: skip
        other += [
            Tensor("head.probe", (1, 1, h), 1, "tower", False),
            Tensor("head.attention.in_proj_weight", (3 * h, h), 1, "tower", False),
            Tensor("head.attention.in_proj_bias", (3 * h,), 1, "tower", False),
            *_norm("head.layernorm", h, 1, bias=True),
        ]
    other += [
        Tensor("mm_input_projection_weight", (h, text_hidden), 1, "tower", False),
        *_norm("mm_soft_emb_norm", h, 1, bias=False),
    ]
    return Tower("the SigLIP vision tower and multi_modal_projector", tuple(linears), tuple(other))


def pixtral_mistral3(
    *, hidden: int, intermediate: int, layers: int, channels: int, patch: int,
    merge: int, feature_layers: int, projector_bias: bool, text_hidden: int,
) -> Tower:  # fmt: skip
    """Mistral 3's Pixtral vision tower and Mistral3MultiModalProjector.

    modeling_pixtral.py PixtralVisionModel: patch_conv (Conv2d without bias), ln_pre
    (PixtralRMSNorm), PixtralAttentionLayer per layer (attention_norm, q/k/v/o_proj h x h
    without bias, ffn_norm, PixtralMLP gate/up/down_proj without bias); the rotary embedding
    holds buffers, no parameters. modeling_mistral3.py Mistral3MultiModalProjector: norm
    (Mistral3RMSNorm of vision h), Mistral3PatchMerger.merging_layer (h * merge^2 -> h, no
    bias), linear_1 (h x the number of vision_feature_layer -> text h) and linear_2 (text h ->
    text h), both with multimodal_projector_bias.
    """
    h, f = hidden, intermediate
    linears = (
        *(TowerLinear(name, h, h, False, layers) for name in ("q_proj", "k_proj", "v_proj")),
        TowerLinear("o_proj", h, h, False, layers),
        TowerLinear("gate_proj", h, f, False, layers),
        TowerLinear("up_proj", h, f, False, layers),
        TowerLinear("down_proj", f, h, False, layers),
        TowerLinear("merging_layer", h * merge * merge, h, False, 1),
        TowerLinear("linear_1", h * feature_layers, text_hidden, projector_bias, 1),
        TowerLinear("linear_2", text_hidden, text_hidden, projector_bias, 1),
    )
    other = (
        Tensor("patch_conv.weight", (h, channels, patch, patch), 1, "tower", False),
        *_norm("ln_pre", h, 1, bias=False),
        *_norm("attention_norm", h, layers, bias=False),
        *_norm("ffn_norm", h, layers, bias=False),
        *_norm("projector.norm", h, 1, bias=False),
    )
    return Tower("the Pixtral vision tower and multi_modal_projector", linears, other)
