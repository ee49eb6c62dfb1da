#!/bin/bash
nvidia-smi --query-gpu=name --format=csv,noheader
export PYTHONPATH=.
mkdir -p $OUT/r
timeout 100 python3 lab/s65/chain_prof.py 2>&1 | grep -v Warn | tee $OUT/r/chain_prof.txt
NCU_S=90 OUT=$OUT/r timeout 120 bash bench/ncu.sh stalls fused3_wg > $OUT/r/ncu_chain_stalls.txt 2>&1; tail -40 $OUT/r/ncu_chain_stalls.txt
timeout 150 ncu --clock-control none -k regex:^cumm_fused3_wg_ --launch-skip 4 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats --section LaunchStats python3 bench/ncu_launch.py fused3_wg > $OUT/r/ncu_chain_sections.txt 2>&1; grep -E "Duration|Throughput|Pipe|Issue|Executed Ipc|Elapsed Cycles|SM Frequency|Registers|Grid|Block Size" $OUT/r/ncu_chain_sections.txt | head -40
timeout 130 python3 lab/s65/fp8_sustained.py 2>&1 | grep -v Warn | tee $OUT/r/fp8_sustained.txt
cd $OUT && tar czf r.tgz r
