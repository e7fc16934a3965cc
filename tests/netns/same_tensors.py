# same_tensors.py A B: exit 0 when the .safetensors files A and B hold the
# same tensors (names, dtypes, shapes, every byte), whatever their headers'
# order and spacing; else say the first difference and exit 1.
import json, struct, sys


def tensors(path):
    f = open(path, "rb")
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return f, 8 + n, header


(fa, base_a, a), (fb, base_b, b) = tensors(sys.argv[1]), tensors(sys.argv[2])
if sorted(a) != sorted(b):
    sys.exit(f"different tensors: {sorted(set(a) ^ set(b))[:5]}")
for name in sorted(a):
    ta, tb = a[name], b[name]
    if (ta["dtype"], ta["shape"]) != (tb["dtype"], tb["shape"]):
        sys.exit(f"{name}: {ta['dtype']} {ta['shape']} beside {tb['dtype']} {tb['shape']}")
    (sa, ea), (sb, eb) = ta["data_offsets"], tb["data_offsets"]
    fa.seek(base_a + sa)
    fb.seek(base_b + sb)
    if fa.read(ea - sa) != fb.read(eb - sb):
        sys.exit(f"{name}: the bytes differ")
