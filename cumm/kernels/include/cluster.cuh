// cluster.cuh: thread block cluster helpers (sm_90) of the chain kernels fused3.cu and fused3_wg.cu, for a
// cluster of CL blocks along x. With CL == 1 (no cluster) the barriers are no-ops and the rank is 0.
#if CL > 1
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "CL > 1 needs thread block clusters (sm_90 or newer): use CL=1 on this architecture"
#endif
#define CUMM_CLUSTER_DIMS __cluster_dims__(CL, 1, 1)
#else
#define CUMM_CLUSTER_DIMS
#endif

__device__ __forceinline__ void cumm_cluster_arrive() {
#if CL > 1
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
#endif
}

// Arrival without release semantics (no GPU-wide memory barrier before it): for a barrier that orders only
// this thread's completed reads of other ranks' shared memory before their later writes.
__device__ __forceinline__ void cumm_cluster_arrive_relaxed() {
#if CL > 1
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void cumm_cluster_wait() {
#if CL > 1
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ int cumm_cluster_rank() {
#if CL > 1
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return static_cast<int>(r);
#else
    return 0;
#endif
}

#if CL > 1
// The address of `p` (this block's shared memory) in the shared memory of cluster rank `rank`.
__device__ __forceinline__ unsigned cumm_cluster_map(const float* p, int rank) {
    const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
    unsigned r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
    return r;
}

// Volatile, so it stays between the cluster barriers (also volatile asm); no memory clobber, so a batch
// of these loads is issued before their results are stored and they are in flight together.
__device__ __forceinline__ float4 cumm_cluster_load4(unsigned addr) {
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr));
    return v;
}
#endif
