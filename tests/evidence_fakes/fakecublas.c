/* A stand-in cuBLAS for the probe tests: column-major sgemm on host memory
 * (the fake driver's device memory), as cublas_api.h declares it. */
#include <stdint.h>
int cublasCreate_v2(void **h) { static int token; *h = &token; return 0; }
int cublasDestroy_v2(void *h) { (void)h; return 0; }
int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a, int lda,
                   const float *b, int ldb, const float *beta, float *c, int ldc) {
    (void)h;
    if (ta || tb) return 15; /* CUBLAS_STATUS_NOT_SUPPORTED: the probe never transposes */
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float s = 0;
            for (int p = 0; p < k; p++) s += a[i + p * lda] * b[p + j * ldb];
            c[i + j * ldc] = *alpha * s + *beta * c[i + j * ldc];
        }
    return 0;
}
