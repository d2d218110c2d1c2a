#!/usr/bin/env bash
# Real-GPU checks of the backend layer (run from the repository root with the built wheels in .whl/, output in $OUT): NVML read through the new backend layer (auto and --backend nvml
# give the same GPUs, vendor and driver marked), the other backends find nothing on an NVIDIA server and say so, what
# a real NVIDIA server has under /sys/class/drm and in a CUDA process's DRM fdinfo, and the DRM client walk's cost on
# a real /proc with hundreds of processes.
set -u
export PYTHONUNBUFFERED=1
REPO=$(pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
mkdir -p /tmp/w && cd /tmp/w
summary='import json,sys; d=json.load(sys.stdin); print(d["source"], d["driver"]); [print(" ", x["index"], x["name"], x["vendor"], x["kernel_driver"], x["kernel_driver_version"], x["pci_bus_id"], "util", x["utilization_gpu_percent"], "mem", x["memory_used_bytes"], "W", x["power_watts"], "C", x["temperature_celsius"], "Tj", x["temperature_junction_celsius"], "Tmem", x["temperature_memory_celsius"], "sm", x["clock_sm_mhz"]) for x in d["devices"]]; [print("  proc", p["pid"], p["name"], p["device_index"], p["gpu_memory_bytes"], p["sm_percent"], p.get("gpu_usage_note")) for p in d["processes"] if p["role"]=="gpu"]; print("  errors", d["errors"])'
{
  echo "== gpusight"; gpusight --version; python3 -c "import gpusight; print(gpusight.__file__)"
  echo "== nvidia-smi"; nvidia-smi --query-gpu=name,pci.bus_id,driver_version,utilization.gpu,memory.used,power.draw,temperature.gpu,clocks.sm --format=csv
  echo "== /sys/class/drm"; ls /sys/class/drm 2>&1; for f in /sys/class/drm/card*/device/uevent; do [ -e "$f" ] && echo "$f: $(grep -E '^(DRIVER|PCI_SLOT_NAME|PCI_ID)=' "$f" | tr '\n' ' ')"; done; ls /sys/class/kfd 2>&1
  echo "== idle: --json (auto)"; gpusight --json | python3 -c "$summary"
  cd "$REPO"; python3 -m gpusight.examples.convnet --duration 70 --num-workers 4 --device cuda --precision bf16 > /tmp/w/train.log 2>&1 &
  TRAINER=$!; cd /tmp/w; sleep 30
  echo "== training: --json --duration 3 (auto)"; gpusight --json --duration 3 > auto.json; python3 -c "$summary" < auto.json
  echo "== training: --json --backend nvml"; gpusight --json --backend nvml > nvml.json; python3 -c "$summary" < nvml.json
  python3 -c "import json; a,b=(json.load(open(f)) for f in ('auto.json','nvml.json')); k=lambda d:[(x['index'],x['uuid'],x['vendor']) for x in d['devices']]; print('same GPUs auto/nvml:', k(a)==k(b), k(a))"
  for b in amdgpu intel; do echo "== --backend $b"; gpusight --json --backend $b | python3 -c "$summary"; echo "rc=$?"; gpusight --once --backend $b | head -5; done
  echo "== gps --once"; gps --once | head -30
  echo "== DRM descriptors of the trainer"; for fd in /proc/$TRAINER/fd/*; do t=$(readlink "$fd"); case "$t" in /dev/dri/*|/dev/kfd|/dev/nvidia*) echo "$fd -> $t"; grep drm- /proc/$TRAINER/fdinfo/${fd##*/} 2>/dev/null | head -12;; esac; done | head -40
  echo "== DRM walk cost, real /proc + 400 sleepers"; for i in $(seq 400); do sleep 60 & done
  python3 - <<'PY'
import os, time
from pathlib import Path
from gpusight.backends.drm.clients import DrmClientScanner
print("processes:", sum(1 for n in os.listdir("/proc") if n.isdigit()))
for drivers in ({"amdgpu"}, {"xe", "i915"}, {"nvidia-drm"}):
    s = DrmClientScanner(Path("/proc"), frozenset(drivers), rescan_s=0.0)
    t = time.perf_counter(); n = 20
    for _ in range(n): scan = s.scan()
    walk = (time.perf_counter() - t) / n
    s2 = DrmClientScanner(Path("/proc"), frozenset(drivers), rescan_s=1e9); s2.scan()
    t = time.perf_counter()
    for _ in range(n): s2.scan()
    print(sorted(drivers), f"walk {walk*1e3:.1f} ms, reread {((time.perf_counter()-t)/n)*1e3:.2f} ms, clients {len(scan.clients)}, kfd {len(scan.kfd_pids)}, unreadable {scan.unreadable}")
PY
  kill $(jobs -p) 2>/dev/null; wait 2>/dev/null
  echo "== trainer log tail"; tail -3 /tmp/w/train.log
} > $OUT/i31.txt 2>&1
cat $OUT/i31.txt | tail -60
