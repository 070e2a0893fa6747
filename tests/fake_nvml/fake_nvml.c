/*
 * A fake libnvidia-ml.so.1 for memtui's tests (docs/architecture.md, "Testing without a GPU").
 *
 * Real pynvml loads it (LD_LIBRARY_PATH for subprocesses, or pynvml.nvmlLib = CDLL(path)
 * in-process) and calls it exactly as it would call the NVIDIA library. Its behaviour comes
 * from a scenario file named by $FAKE_NVML_SCENARIO, re-read on EVERY call, so a test can
 * change memory, processes or inject an error while memtui runs. Each call appends its
 * function name to $FAKE_NVML_CALLS (when set), which is how tests count NVML calls.
 *
 * Scenario format: one directive per line, fields separated by single spaces.
 *   driver 550.54.15              system driver version
 *   cuda 12040                    CUDA driver version (major*1000 + minor*10)
 *   count 4                       number of GPUs
 *   dev KEY FIELD VALUE...        KEY is "0" for GPU 0, "0.1" for MIG device 1 of GPU 0;
 *                                 FIELD in name, uuid, total, used, reserved (bytes),
 *                                 util "GPU MEM" (percent), mig (1 = MIG mode on),
 *                                 migcount (max MIG devices), gi (GPU instance id),
 *                                 temp (degrees C), power and powerlimit (milliwatts),
 *                                 clocks "SM MEM" (MHz); a device without temp, power,
 *                                 powerlimit or clocks answers NOT_SUPPORTED for it, as
 *                                 real boards without the sensor do
 *   proc KEY PID USED [GI]        a compute process; USED -1 means "not available"
 *   err FUNC CODE [KEY]           FUNC returns CODE (for device KEY only, if given)
 *   hang FUNC                     FUNC blocks until this line disappears (60 s at most)
 * Unknown functions that a monitor might call exist and return NOT_SUPPORTED (3).
 * Build with -DFAKE_NO_MEMORY_V2 to get an "old driver" without nvmlDeviceGetMemoryInfo_v2.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OK 0
#define E_INVALID_ARGUMENT 2
#define E_NOT_SUPPORTED 3
#define E_NOT_FOUND 6
#define E_INSUFFICIENT_SIZE 7
#define E_ARGUMENT_VERSION_MISMATCH 25
#define MEMORY_V2_VERSION 0x02000028u
#define NOT_AVAILABLE_ULL 0xFFFFFFFFFFFFFFFFull

typedef void *nvmlDevice_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

/* One scenario buffer per thread (callers may poll from several threads at once), freed
 * when its thread ends: a thread per poll must not leak a buffer per poll, or memory
 * measurements of the program under test would measure this fake. */
static __thread char *scenario;
static __thread size_t scenario_cap;
static pthread_key_t scenario_key;
static pthread_once_t scenario_key_once = PTHREAD_ONCE_INIT;

static void make_scenario_key(void) { pthread_key_create(&scenario_key, free); }

/* Re-read the scenario file; an unreadable file reads as an empty scenario. */
static void load(void) {
    const char *path = getenv("FAKE_NVML_SCENARIO");
    size_t n = 0;
    if (!scenario) {
        pthread_once(&scenario_key_once, make_scenario_key);
        scenario_cap = 1 << 16;
        scenario = malloc(scenario_cap);
        pthread_setspecific(scenario_key, scenario);
    }
    scenario[0] = 0;
    if (!path) return;
    FILE *f = fopen(path, "rb");
    if (!f) return;
    for (;;) {
        if (n + 4096 + 1 > scenario_cap) {
            scenario_cap *= 2;
            scenario = realloc(scenario, scenario_cap);
            pthread_setspecific(scenario_key, scenario);
        }
        size_t got = fread(scenario + n, 1, 4096, f);
        n += got;
        if (got == 0) break;
    }
    fclose(f);
    scenario[n] = 0;
}

static void log_call(const char *fn) {
    const char *path = getenv("FAKE_NVML_CALLS");
    if (!path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "%s\n", fn);
    fclose(f);
}

/* Find the line starting with `prefix`; return the rest of that line (up to newline). */
static const char *find(const char *prefix, const char *from) {
    size_t len = strlen(prefix);
    const char *p = from ? from : scenario;
    while (p && *p) {
        if (strncmp(p, prefix, len) == 0) return p + len;
        p = strchr(p, '\n');
        if (p) p++;
    }
    return NULL;
}

static void copy_rest(const char *src, char *dst, size_t cap) {
    size_t i = 0;
    while (src[i] && src[i] != '\n' && i + 1 < cap) { dst[i] = src[i]; i++; }
    dst[i] = 0;
}

static void key_of(nvmlDevice_t dev, char *out, size_t cap) {
    uintptr_t h = (uintptr_t)dev;
    unsigned gpu = (unsigned)(h >> 8) - 1, mig = (unsigned)(h & 0xff);
    if (mig) snprintf(out, cap, "%u.%u", gpu, mig - 1);
    else snprintf(out, cap, "%u", gpu);
}

static const char *field(const char *key, const char *name) {
    char prefix[128];
    snprintf(prefix, sizeof prefix, "dev %s %s ", key, name);
    return find(prefix, NULL);
}

static unsigned long long field_ull(const char *key, const char *name, unsigned long long dflt) {
    const char *v = field(key, name);
    return v ? strtoull(v, NULL, 10) : dflt;
}

/* Return the injected error code for fn (and device key), or 0. */
static int injected(const char *fn, const char *key) {
    char prefix[160];
    snprintf(prefix, sizeof prefix, "err %s ", fn);
    const char *p = NULL;
    while ((p = find(prefix, p)) != NULL) {
        char *end;
        long code = strtol(p, &end, 10);
        if (*end == ' ' && key) {
            char want[64];
            copy_rest(end + 1, want, sizeof want);
            if (strcmp(want, key) == 0) return (int)code;
        } else if (*end != ' ') {
            return (int)code;
        }
    }
    return 0;
}

static void maybe_hang(const char *fn) {
    char prefix[160];
    snprintf(prefix, sizeof prefix, "hang %s\n", fn);
    for (int i = 0; i < 6000; i++) {
        load();
        if (!find(prefix, NULL)) return;
        usleep(10000);
    }
}

/* Common prologue: count the call, re-read the scenario, honour hang/err directives. */
#define BEGIN(fn, key)                          \
    do {                                        \
        log_call(fn);                           \
        load();                                 \
        maybe_hang(fn);                         \
        int e_ = injected(fn, key);             \
        if (e_) return e_;                      \
    } while (0)

#define BEGIN_DEV(fn, dev)                      \
    char key[32];                               \
    key_of(dev, key, sizeof key);               \
    BEGIN(fn, key)

static int device_exists(const char *key) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "dev %s ", key);
    return find(prefix, NULL) != NULL;
}

int nvmlInitWithFlags(unsigned int flags) { (void)flags; BEGIN("nvmlInitWithFlags", NULL); return OK; }
int nvmlInit_v2(void) { BEGIN("nvmlInit_v2", NULL); return OK; }
int nvmlInit(void) { BEGIN("nvmlInit", NULL); return OK; }
int nvmlShutdown(void) { BEGIN("nvmlShutdown", NULL); return OK; }

const char *nvmlErrorString(int code) {
    log_call("nvmlErrorString");
    switch (code) {
    case 0: return "Success";
    case 3: return "Not Supported";
    case 15: return "GPU is lost";
    case 999: return "Unknown Error";
    default: return "Fake NVML error";
    }
}

static int copy_string(const char *value, char *buf, unsigned int len) {
    char tmp[256];
    copy_rest(value, tmp, sizeof tmp);
    if (strlen(tmp) + 1 > len) return E_INSUFFICIENT_SIZE;
    strcpy(buf, tmp);
    return OK;
}

int nvmlSystemGetDriverVersion(char *buf, unsigned int len) {
    BEGIN("nvmlSystemGetDriverVersion", NULL);
    const char *v = find("driver ", NULL);
    return copy_string(v ? v : "550.54.15", buf, len);
}

int nvmlSystemGetNVMLVersion(char *buf, unsigned int len) {
    BEGIN("nvmlSystemGetNVMLVersion", NULL);
    return copy_string("12.550.54.15", buf, len);
}

static int cuda_version(const char *fn, int *out) {
    BEGIN(fn, NULL);
    const char *v = find("cuda ", NULL);
    *out = v ? atoi(v) : 12040;
    return OK;
}
int nvmlSystemGetCudaDriverVersion(int *out) { return cuda_version("nvmlSystemGetCudaDriverVersion", out); }
int nvmlSystemGetCudaDriverVersion_v2(int *out) { return cuda_version("nvmlSystemGetCudaDriverVersion_v2", out); }

static int device_count(const char *fn, unsigned int *count) {
    BEGIN(fn, NULL);
    const char *v = find("count ", NULL);
    *count = v ? (unsigned)atoi(v) : 0;
    return OK;
}
int nvmlDeviceGetCount_v2(unsigned int *count) { return device_count("nvmlDeviceGetCount_v2", count); }
int nvmlDeviceGetCount(unsigned int *count) { return device_count("nvmlDeviceGetCount", count); }

static int handle_by_index(const char *fn, unsigned int index, nvmlDevice_t *dev) {
    char key[32];
    snprintf(key, sizeof key, "%u", index);
    BEGIN(fn, key);
    const char *v = find("count ", NULL);
    if (!v || index >= (unsigned)atoi(v)) return E_INVALID_ARGUMENT;
    *dev = (nvmlDevice_t)(uintptr_t)((index + 1) << 8);
    return OK;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) { return handle_by_index("nvmlDeviceGetHandleByIndex_v2", i, d); }
int nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d) { return handle_by_index("nvmlDeviceGetHandleByIndex", i, d); }

int nvmlDeviceGetIndex(nvmlDevice_t dev, unsigned int *index) {
    BEGIN_DEV("nvmlDeviceGetIndex", dev);
    *index = (unsigned)(((uintptr_t)dev >> 8) - 1);
    return OK;
}

int nvmlDeviceGetName(nvmlDevice_t dev, char *buf, unsigned int len) {
    BEGIN_DEV("nvmlDeviceGetName", dev);
    const char *v = field(key, "name");
    return copy_string(v ? v : "NVIDIA Fake GPU", buf, len);
}

int nvmlDeviceGetUUID(nvmlDevice_t dev, char *buf, unsigned int len) {
    BEGIN_DEV("nvmlDeviceGetUUID", dev);
    const char *v = field(key, "uuid");
    char dflt[64];
    snprintf(dflt, sizeof dflt, "GPU-fake-%s", key);
    return copy_string(v ? v : dflt, buf, len);
}

static void memory_of(const char *key, unsigned long long *total, unsigned long long *used,
                      unsigned long long *reserved) {
    *total = field_ull(key, "total", 85520809984ull);
    *used = field_ull(key, "used", 0);
    *reserved = field_ull(key, "reserved", 0);
}

/* v1: `used` includes the memory the driver reserves (what old nvidia-smi showed). */
int nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *m) {
    BEGIN_DEV("nvmlDeviceGetMemoryInfo", dev);
    unsigned long long t, u, r;
    memory_of(key, &t, &u, &r);
    m->total = t;
    m->used = u + r;
    m->free = t - u - r;
    return OK;
}

#ifndef FAKE_NO_MEMORY_V2
int nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t *m) {
    BEGIN_DEV("nvmlDeviceGetMemoryInfo_v2", dev);
    if (m->version != MEMORY_V2_VERSION) return E_ARGUMENT_VERSION_MISMATCH;
    unsigned long long t, u, r;
    memory_of(key, &t, &u, &r);
    m->total = t;
    m->reserved = r;
    m->used = u;
    m->free = t - u - r;
    return OK;
}
#endif

int nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *u) {
    BEGIN_DEV("nvmlDeviceGetUtilizationRates", dev);
    const char *v = field(key, "util");
    unsigned g = 0, m = 0;
    if (v) sscanf(v, "%u %u", &g, &m);
    u->gpu = g;
    u->memory = m;
    return OK;
}

/* A reading from the scenario, or NOT_SUPPORTED when the device has none. */
static int reading(const char *key, const char *name, unsigned int *out) {
    const char *v = field(key, name);
    if (!v) return E_NOT_SUPPORTED;
    *out = (unsigned)strtoul(v, NULL, 10);
    return OK;
}

/* Only the GPU core sensor (NVML_TEMPERATURE_GPU = 0) exists, as in nvml.h. */
int nvmlDeviceGetTemperature(nvmlDevice_t dev, int sensor, unsigned int *temp) {
    BEGIN_DEV("nvmlDeviceGetTemperature", dev);
    if (sensor != 0) return E_INVALID_ARGUMENT;
    return reading(key, "temp", temp);
}

int nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned int *mw) {
    BEGIN_DEV("nvmlDeviceGetPowerUsage", dev);
    return reading(key, "power", mw);
}

int nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t dev, unsigned int *mw) {
    BEGIN_DEV("nvmlDeviceGetEnforcedPowerLimit", dev);
    return reading(key, "powerlimit", mw);
}

/* NVML_CLOCK_GRAPHICS 0, SM 1, MEM 2, VIDEO 3 (nvml.h nvmlClockType_t): graphics follows
 * the SM clock on current parts; video is not modelled. */
int nvmlDeviceGetClockInfo(nvmlDevice_t dev, int type, unsigned int *mhz) {
    BEGIN_DEV("nvmlDeviceGetClockInfo", dev);
    const char *v = field(key, "clocks");
    if (!v) return E_NOT_SUPPORTED;
    unsigned sm = 0, mem = 0;
    sscanf(v, "%u %u", &sm, &mem);
    if (type == 0 || type == 1) *mhz = sm;
    else if (type == 2) *mhz = mem;
    else return E_NOT_SUPPORTED;
    return OK;
}

/* First call with *count == 0 (or too small) answers INSUFFICIENT_SIZE and the real count. */
static int processes(const char *fn, nvmlDevice_t dev, unsigned int *count, nvmlProcessInfo_t *out) {
    BEGIN_DEV(fn, dev);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "proc %s ", key);
    unsigned n = 0;
    const char *p = NULL;
    while ((p = find(prefix, p)) != NULL) n++;
    if (n == 0) { *count = 0; return OK; }
    if (out == NULL || *count < n) { *count = n; return E_INSUFFICIENT_SIZE; }
    unsigned i = 0;
    p = NULL;
    while ((p = find(prefix, p)) != NULL && i < n) {
        long long used = -1;
        unsigned pid = 0, gi = 0xFFFFFFFFu;
        sscanf(p, "%u %lld %u", &pid, &used, &gi);
        out[i].pid = pid;
        out[i].usedGpuMemory = used < 0 ? NOT_AVAILABLE_ULL : (unsigned long long)used;
        out[i].gpuInstanceId = gi;
        out[i].computeInstanceId = gi == 0xFFFFFFFFu ? 0xFFFFFFFFu : 0;
        i++;
    }
    *count = i;
    return OK;
}
int nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_t *o) {
    return processes("nvmlDeviceGetComputeRunningProcesses_v3", d, c, o);
}
int nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_t *o) {
    return processes("nvmlDeviceGetComputeRunningProcesses_v2", d, c, o);
}
int nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_t *o) {
    (void)o;
    BEGIN_DEV("nvmlDeviceGetGraphicsRunningProcesses_v3", d);
    *c = 0;
    return OK;
}
int nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_t *o) {
    (void)o;
    BEGIN_DEV("nvmlDeviceGetMPSComputeRunningProcesses_v3", d);
    *c = 0;
    return OK;
}

int nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned int *current, unsigned int *pending) {
    BEGIN_DEV("nvmlDeviceGetMigMode", dev);
    const char *v = field(key, "mig");
    if (!v) return E_NOT_SUPPORTED;  /* what a GPU without MIG answers */
    *current = *pending = (unsigned)atoi(v);
    return OK;
}

int nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t dev, unsigned int *count) {
    BEGIN_DEV("nvmlDeviceGetMaxMigDeviceCount", dev);
    *count = (unsigned)field_ull(key, "migcount", 7);
    return OK;
}

int nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dev, unsigned int index, nvmlDevice_t *mig) {
    BEGIN_DEV("nvmlDeviceGetMigDeviceHandleByIndex", dev);
    char child[48];
    snprintf(child, sizeof child, "%s.%u", key, index);
    if (!device_exists(child)) return E_NOT_FOUND;
    *mig = (nvmlDevice_t)((uintptr_t)dev | (index + 1));
    return OK;
}

int nvmlDeviceIsMigDeviceHandle(nvmlDevice_t dev, unsigned int *is_mig) {
    BEGIN_DEV("nvmlDeviceIsMigDeviceHandle", dev);
    *is_mig = ((uintptr_t)dev & 0xff) != 0;
    return OK;
}

int nvmlDeviceGetGpuInstanceId(nvmlDevice_t dev, unsigned int *id) {
    BEGIN_DEV("nvmlDeviceGetGpuInstanceId", dev);
    if (((uintptr_t)dev & 0xff) == 0) return E_INVALID_ARGUMENT;
    *id = (unsigned)field_ull(key, "gi", 0);
    return OK;
}

int nvmlDeviceGetComputeInstanceId(nvmlDevice_t dev, unsigned int *id) {
    BEGIN_DEV("nvmlDeviceGetComputeInstanceId", dev);
    if (((uintptr_t)dev & 0xff) == 0) return E_INVALID_ARGUMENT;
    *id = 0;
    return OK;
}

int nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig, nvmlDevice_t *dev) {
    BEGIN_DEV("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", mig);
    *dev = (nvmlDevice_t)((uintptr_t)mig & ~(uintptr_t)0xff);
    return OK;
}

/* Everything else a monitor (memtui, nvitop) may touch: present, but NOT_SUPPORTED. */
#define STUB(name) \
    int name(void) { BEGIN(#name, NULL); return E_NOT_SUPPORTED; }
STUB(nvmlDeviceGetHandleByUUID)
STUB(nvmlDeviceGetHandleByPciBusId_v2)
STUB(nvmlDeviceGetTemperatureV)
STUB(nvmlDeviceGetFanSpeed)
STUB(nvmlDeviceGetFanSpeed_v2)
STUB(nvmlDeviceGetNumFans)
STUB(nvmlDeviceGetTotalEnergyConsumption)
STUB(nvmlDeviceGetPowerManagementLimit)
STUB(nvmlDeviceGetPowerManagementMode)
STUB(nvmlDeviceGetPerformanceState)
STUB(nvmlDeviceGetMaxClockInfo)
STUB(nvmlDeviceGetClock)
STUB(nvmlDeviceGetPciInfo_v3)
STUB(nvmlDeviceGetPciInfo)
STUB(nvmlDeviceGetBAR1MemoryInfo)
STUB(nvmlDeviceGetPersistenceMode)
STUB(nvmlDeviceGetDisplayMode)
STUB(nvmlDeviceGetDisplayActive)
STUB(nvmlDeviceGetComputeMode)
STUB(nvmlDeviceGetEccMode)
STUB(nvmlDeviceGetTotalEccErrors)
STUB(nvmlDeviceGetCurrPcieLinkGeneration)
STUB(nvmlDeviceGetCurrPcieLinkWidth)
STUB(nvmlDeviceGetMaxPcieLinkGeneration)
STUB(nvmlDeviceGetMaxPcieLinkWidth)
STUB(nvmlDeviceGetPcieThroughput)
STUB(nvmlDeviceGetNvLinkState)
STUB(nvmlDeviceGetNvLinkUtilizationCounter)
STUB(nvmlDeviceGetEncoderUtilization)
STUB(nvmlDeviceGetDecoderUtilization)
STUB(nvmlDeviceGetProcessUtilization)
STUB(nvmlDeviceGetSamples)
STUB(nvmlDeviceGetCudaComputeCapability)
STUB(nvmlDeviceGetSerial)
STUB(nvmlDeviceGetMinorNumber)
STUB(nvmlDeviceGetBoardId)
STUB(nvmlDeviceGetArchitecture)
STUB(nvmlDeviceGetBrand)
STUB(nvmlDeviceGetAccountingMode)
STUB(nvmlDeviceGetVirtualizationMode)
STUB(nvmlDeviceGetCurrentClocksThrottleReasons)
STUB(nvmlDeviceGetCurrentClocksEventReasons)
STUB(nvmlDeviceGetMemoryBusWidth)
STUB(nvmlDeviceGetInforomVersion)
STUB(nvmlDeviceGetVbiosVersion)
STUB(nvmlDeviceGetMultiGpuBoard)
STUB(nvmlDeviceGetFieldValues)
STUB(nvmlDeviceGetAttributes_v2)
STUB(nvmlDeviceGetGpuInstances)
STUB(nvmlSystemGetProcessName)
