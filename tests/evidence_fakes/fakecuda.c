/* A stand-in CUDA driver for the probe tests: device memory is host memory,
 * the one kernel it "compiles" is vector_add (from the PTX text the driver
 * probe loads), and FAKECUDA_MODE picks a misbehaviour:
 *   pass (default) | wrong (adds 1 to every sum) | refuse (cuModuleLoadData
 *   returns CUDA_ERROR_NOT_SUPPORTED) | spin (cuModuleLoadData busy-loops) |
 *   sleep (cuModuleLoadData blocks) | segv (cuLaunchKernel crashes) |
 *   syncspin (cuCtxSynchronize busy-waits for ever: a kernel that never ends).
 * Built by tests/test_evidence.py with gcc; signatures as in cuda.h. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
static const char *mode(void) { const char *m = getenv("FAKECUDA_MODE"); return m ? m : "pass"; }
static int is(const char *m) { return strcmp(mode(), m) == 0; }
static int module_token, function_token, context_token;

CUresult cuInit(unsigned flags) { (void)flags; return 0; }
CUresult cuDriverGetVersion(int *v) { *v = 12080; return 0; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
CUresult cuDeviceGet(int *d, int i) { *d = i; return i == 0 ? 0 : 101; }
CUresult cuDeviceGetName(char *name, int len, int d) { (void)d; strncpy(name, "Fake GPU", (size_t)len); return 0; }
CUresult cuDeviceGetAttribute(int *v, int attr, int d) { (void)d; *v = attr == 75 ? 8 : attr == 76 ? 6 : 0; return 0; }
CUresult cuDevicePrimaryCtxRetain(void **ctx, int d) { (void)d; *ctx = &context_token; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) { (void)d; return 0; }
CUresult cuCtxSetCurrent(void *ctx) { (void)ctx; return 0; }
CUresult cuCtxSynchronize(void) {
    if (is("syncspin")) { volatile unsigned long x = 0; for (;;) x++; }
    return 0;
}
CUresult cuMemAlloc_v2(uint64_t *p, size_t n) { *p = (uint64_t)(uintptr_t)calloc(1, n ? n : 1); return 0; }
CUresult cuMemFree_v2(uint64_t p) { free((void *)(uintptr_t)p); return 0; }
CUresult cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t n) { memcpy((void *)(uintptr_t)dst, src, n); return 0; }
CUresult cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t n) { memcpy(dst, (void *)(uintptr_t)src, n); return 0; }
CUresult cuGetErrorName(CUresult e, const char **s) { *s = e == 801 ? "CUDA_ERROR_NOT_SUPPORTED" : "CUDA_ERROR_UNKNOWN"; return 0; }
CUresult cuModuleLoadData(void **m, const void *image) {
    if (is("refuse")) return 801;
    if (is("spin")) { volatile unsigned long x = 0; for (;;) x++; }
    if (is("sleep")) for (;;) sleep(1);
    if (!strstr((const char *)image, ".entry vector_add")) return 218; /* CUDA_ERROR_INVALID_PTX */
    *m = &module_token; return 0;
}
CUresult cuModuleUnload(void *m) { (void)m; return 0; }
CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
    (void)m; if (strcmp(name, "vector_add")) return 500; *f = &function_token; return 0;
}
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra) {
    (void)f; (void)gy; (void)gz; (void)by; (void)bz; (void)shared; (void)stream; (void)extra;
    if (is("segv")) { volatile int *p = 0; *p = 1; }
    float *a = (float *)(uintptr_t)*(uint64_t *)params[0], *b = (float *)(uintptr_t)*(uint64_t *)params[1];
    float *c = (float *)(uintptr_t)*(uint64_t *)params[2];
    unsigned n = *(unsigned *)params[3];
    for (unsigned i = 0; i < n && i < gx * bx; i++) c[i] = a[i] + b[i] + (is("wrong") ? 1.0f : 0.0f);
    return 0;
}
