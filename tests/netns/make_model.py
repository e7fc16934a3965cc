# make_model.py PATH MIB: a .safetensors file of f32 matrices [1024, 4096]
# (16 MiB each): every 4 KiB page starts with its tensor's and its own index,
# so a page or a row out of place anywhere shows.
import json, struct, sys
path, mib = sys.argv[1], int(sys.argv[2])
count = mib // 16
rows, cols = 1024, 4096
size = rows * cols * 4
header = {f"layers.{i}.weight": {"dtype": "F32", "shape": [rows, cols], "data_offsets": [i * size, (i + 1) * size]}
          for i in range(count)}
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
filler = bytes(range(256)) * 16
with open(path, "wb") as out:
    out.write(struct.pack("<Q", len(text)) + text)
    for i in range(count):
        out.write(b"".join(struct.pack("<II", i, page) + filler[8:] for page in range(size // 4096)))
