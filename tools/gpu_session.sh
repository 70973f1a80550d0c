#!/usr/bin/env bash
# The GPU calls of one session (results/<dir>/README.md says which), run on the device:
#   bash tools/gpu_session.sh sweep|kb|small|full ...   (carry target/release/dlrm-bench and .bwrap/, a
#   bubblewrap .deb from `apt-get download bubblewrap`; results tarred into $OUT/r.tgz)
set -uo pipefail
START=$(date +%s)
O=$OUT/r; mkdir -p $O
for f in .bwrap/*.deb; do dpkg -x $f /tmp/bw; done; export PATH=/tmp/bw/usr/bin:$PATH
lib=$(dirname $(find $(python3 -c 'import site; print(site.getsitepackages()[0])')/nvidia -name 'libnvrtc.so*' | head -1)); export LD_LIBRARY_PATH=$lib
{ command -v bwrap; bwrap --version; command -v python3; ls -la $(readlink -f $(command -v python3)); python3 -c 'import torch,sys; print(torch.__version__, torch.__file__)';
  bwrap --ro-bind / / --dev-bind /dev /dev --proc /proc --unshare-net --die-with-parent true && echo bwrap-works;
  nvidia-smi --query-gpu=name,driver_version --format=csv; nproc; pwd; namei -m $PWD/tools/kernelbench_eval.py; setpriv --reuid 2000000 --regid 2000000 --clear-groups python3 -c "import torch; open(\"tools/kernelbench_eval.py\").read(); print(\"uid 2000000 reads torch and tools\")"; } > $O/env.txt 2>&1
for what in "$@"; do
case "$what" in
sweep)
  S=$(date +%s)
  timeout 560 target/release/dlrm-bench sweep score sweeps/demo --torch=eager --timeout-s 60 --out $O/sweep > $O/sweep.log 2>&1
  echo "sweep rc=$? $(( $(date +%s)-S ))s" >> $O/env.txt ;;
kb)
  python3 -c "import os; os.environ['PYTORCH_NVML_BASED_CUDA_CHECK']='1'; import torch; print('after import torch: bad fork', torch.cuda._is_in_bad_fork()); import torch.utils.cpp_extension; print('after cpp_extension', torch.cuda._is_in_bad_fork()); import sys; sys.path.insert(0,'tools'); import torch_peer; print('after torch_peer', torch.cuda._is_in_bad_fork())" >> $O/env.txt 2>&1
  S=$(date +%s)
  timeout 420 target/release/dlrm-bench kernelbench sweeps/demo/answers/demo-kernelbench-s0 sweeps/demo/answers/demo-kernelbench-s1 --torch=eager --timeout-s 60 --out $O/kb > $O/kb.log 2>&1
  echo "kb rc=$? $(( $(date +%s)-S ))s" >> $O/env.txt ;;
small)
  tools/build_cubin.sh candidates/examples/embedding_bag_sum/cubin_warp_per_bag > $O/cubin.txt 2>&1
  S=$(date +%s)
  timeout 200 tools/gpu_run.sh $O/corpus-small small --candidates candidates/examples --candidates candidates/tuned --candidates candidates/exploits --candidates candidates/tripwires --timeout-s 30 --budget-s 2 > /dev/null 2>&1; echo "corpus-small rc=$? $(( $(date +%s)-S ))s" >> $O/env.txt ;;
full)
  tools/build_cubin.sh candidates/examples/embedding_bag_sum/cubin_warp_per_bag > $O/cubin.txt 2>&1
  S=$(date +%s)
  timeout $(( 570 - $(date +%s) + START )) tools/gpu_run.sh $O/corpus-full full --candidates candidates/examples --candidates candidates/tuned --candidates candidates/exploits --candidates candidates/tripwires --timeout-s 60 > /dev/null 2>&1; echo "corpus-full rc=$? $(( $(date +%s)-S ))s" >> $O/env.txt ;;
esac
done
rm -rf $O/*/inputs $O/*/.kernelbench-builds
cd $OUT && tar czf r.tgz r && rm -rf r
