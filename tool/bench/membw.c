/* Streaming-read memory bandwidth: sums an f32 array far larger than the caches, OpenMP threads
 * (OMP_NUM_THREADS) each on a contiguous slice, four independent vector accumulators so the adds
 * are not the bottleneck. Prints the best of 10 passes in GB/s (1e9 bytes/s).
 * Usage: membw [MiB]   (default 512)                          Build: cc -O3 -march=native -fopenmp */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef float v8 __attribute__((vector_size(32)));

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 512;
    size_t n = mib * 1024 * 1024 / sizeof(v8);
    n -= n % 4;
    v8 *a = aligned_alloc(64, n * sizeof(v8));
    if (!a || n == 0) { fprintf(stderr, "membw: cannot allocate %zu MiB\n", mib); return 1; }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) { /* first touch by the thread that reads it later */
        for (int j = 0; j < 8; j++) a[i][j] = (float)((i + j) & 7);
    }
    double best = 0, check = 0;
    for (int rep = 0; rep < 10; rep++) {
        double t = omp_get_wtime(), total = 0;
#pragma omp parallel reduction(+ : total)
        {
            v8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
#pragma omp for schedule(static)
            for (size_t i = 0; i < n; i += 4) {
                s0 += a[i]; s1 += a[i + 1]; s2 += a[i + 2]; s3 += a[i + 3];
            }
            v8 s = s0 + s1 + s2 + s3;
            for (int j = 0; j < 8; j++) total += s[j];
        }
        t = omp_get_wtime() - t;
        double gbs = (double)n * sizeof(v8) / t / 1e9;
        if (gbs > best) best = gbs;
        check = total;
    }
    /* the sum is printed so the compiler cannot drop the loads */
    printf("%d threads: %.2f GB/s (sum %.0f)\n", omp_get_max_threads(), best, check);
    free(a);
    return 0;
}
