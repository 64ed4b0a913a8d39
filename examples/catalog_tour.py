"""A tour of the catalogs and the unit-safe calculator.

Run: .venv/bin/python examples/catalog_tour.py
"""

from inferlab import Q, evaluate, load_hardware, load_model
from inferlab.results.render import pretty

h100 = load_hardware("h100-sxm")
llama = load_model("llama-3.1-70b")

# Back-of-envelope decode floor: every weight is read once per decode step.
weights = Q(llama.weight_bytes("bf16"), "B")
floor = (weights / h100.memory_bandwidth.quantity).to("ms")
print(f"{llama.name}: {weights.to('GB'):.1f~P} of BF16 weights; at {h100.memory_bandwidth.stated} "
      f"one full read takes {floor:.1f~P} (a single-GPU decode step cannot be faster)")

# Where an op becomes compute-bound on this GPU.
print(f"ridge point of the {h100.name} at BF16: {h100.ridge_point('bf16'):.0f~P}")

# KV cache for one 32k-token sequence, full attention vs sliding window.
for name in ("llama-3.1-70b", "gemma-3-27b", "deepseek-v3"):
    model = load_model(name)
    kv = Q(float(model.kv_cache_bytes(32_768, "bf16")), "B").to("GiB")
    print(f"{name:15s} KV cache at 32k tokens (bf16): {kv:6.2f~P}  ({model.attention_type}, {model.layer_kinds})")

# The calculator names catalog values and reports their sources.
result = evaluate("b200.flops.fp4 / b200.memory_bandwidth")
print(f"B200 FP4 ridge point: {result.value:.0f~P}")
for ref in result.references:
    print(f"  {ref.text} = {pretty(ref.value)}  from: {ref.source}")
