# Device-copy-only patch: %globaltimer stamps in fused3_wg (start, phase 1 done, barrier released, end), printed
# by thread 0 of every block. Never committed.
p = "cumm/kernels/chain/fused3_wg/kernel.cu"
s = open(p).read()
g = 'unsigned long long %s; asm volatile("mov.u64 %%0, %%globaltimer;" : "=l"(%s));'
s = s.replace("    cumm_grid_dependency_wait();  // (first: see grid_barrier.cuh)\n",
              "    cumm_grid_dependency_wait();  // (first: see grid_barrier.cuh)\n    " + g % ("st0", "st0") + "\n", 1)
s = s.replace("#if TMA\n    cumm_fence_proxy_async_global();  // T's stores",
              "    " + g % ("st1", "st1") + "\n#if TMA\n    cumm_fence_proxy_async_global();  // T's stores", 1)
s = s.replace("    int t = cluster;\n    if (pre) {", "    " + g % ("st2", "st2") + "\n    int t = cluster;\n    if (pre) {", 1)
s = s.replace("    cumm_cluster_wait();  // no block exits while another rank may still read its partial tile\n}",
              "    cumm_cluster_wait();  // no block exits while another rank may still read its partial tile\n    "
              + g % ("st3", "st3") + '\n    if (threadIdx.x == 0) printf("STAMP %d %llu %llu %llu %llu\\n", (int)blockIdx.x, st0, st1, st2, st3);\n}', 1)
assert s.count("globaltimer") == 4, s.count("globaltimer")
open(p, "w").write(s)
print("patched")
