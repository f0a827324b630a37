/* A stand-in cuFFT that refuses like ZLUDA's: every call returns
 * CUFFT_NOT_SUPPORTED (16) (zluda_fft/src/impl.rs, release builds). */
int cufftPlan1d(int *plan, int nx, int type, int batch) { (void)plan; (void)nx; (void)type; (void)batch; return 16; }
int cufftExecC2C(int plan, void *i, void *o, int dir) { (void)plan; (void)i; (void)o; (void)dir; return 16; }
int cufftDestroy(int plan) { (void)plan; return 16; }
