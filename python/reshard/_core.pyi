"""
reshard's C++ library: layouts, plans, safetensors files and sharded arrays
"""

from collections.abc import Iterable, Iterator, Mapping, Sequence
import os
import pathlib
from typing import Annotated, Any, overload

import numpy
from numpy.typing import NDArray


def _register_error_classes(classes: dict[str, type[Exception]]) -> None:
    """
    Installs the Python class raised for each error code name (done by reshard.errors).
    """

def _error_code_names() -> list[str]:
    """Every error code name, in the C++ enum's order."""

def _dtype_names() -> list[str]:
    """Every safetensors dtype name reshard knows, in the format's order."""

def _dtype_bits(name: str) -> int:
    """Bits per element of a dtype given by its safetensors name."""

class Topology:
    """
    Every device of a job (ids 0..n-1) with the process that owns it; every
    process holds the same one, so every process plans alike.
    """

    def __init__(self, process_of_device: Sequence[int]) -> None:
        """process_of_device[d] owns device d; processes are 0..P-1."""

    @staticmethod
    def uniform(num_devices: int, num_processes: int = 1) -> Topology:
        """Device d belongs to process d // (num_devices // num_processes)."""

    @property
    def num_devices(self) -> int:
        """Number of devices."""

    @property
    def num_processes(self) -> int:
        """Number of processes."""

    def process_of(self, device: int) -> int:
        """The process owning `device` (UnknownDeviceError if none)."""

    def devices_of(self, process: int) -> list[int]:
        """The devices `process` owns, ascending."""

    @overload
    def __eq__(self, arg: Topology, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __repr__(self) -> str: ...

class Box:
    """A hyper-rectangle of array indices: origin and shape per dimension."""

    def __init__(self, origin: Sequence[int], shape: Sequence[int]) -> None: ...

    @property
    def origin(self) -> tuple[int, ...]:
        """First index per dimension."""

    @property
    def shape(self) -> tuple[int, ...]:
        """Extent per dimension."""

    @property
    def slices(self) -> tuple[slice, ...]:
        """A tuple of slice(begin, end), to index a numpy array with."""

    @property
    def volume(self) -> int:
        """Number of elements."""

    @property
    def rank(self) -> int:
        """Number of dimensions."""

    @overload
    def __eq__(self, arg: Box, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

class Mesh:
    """
    An N-d array of distinct devices with one name per axis.

    ``Mesh(devices, axis_names)`` as in JAX: ``devices`` is an array (or nested
    list) of device ids, or of objects with an ``id`` such as ``jax.Device``,
    whose shape is the mesh's; its row-major order is the logical device order,
    which is part of the mesh.
    """

    def __init__(self, devices: object, axis_names: str | Sequence[str]) -> None:
        """
        Builds a mesh from an array of device ids shaped like the mesh. Raises InvalidMeshError.
        """

    @staticmethod
    def from_axes(axes: Mapping[str, int] | Sequence[tuple[str, int]], devices: Sequence[int] | None = None) -> Mesh:
        """
        A mesh from {name: size} (or (name, size) pairs) and a flat device list in
        row-major mesh order; devices 0..n-1 when omitted.
        """

    @property
    def axis_names(self) -> tuple[str, ...]:
        """The axis names, in order."""

    @property
    def shape(self) -> dict[str, int]:
        """{axis name: size}, in axis order (as jax.sharding.Mesh.shape)."""

    @property
    def axis_sizes(self) -> tuple[int, ...]:
        """The axis sizes, in order."""

    @property
    def devices(self) -> numpy.ndarray:
        """The device ids as an int64 numpy array of the mesh's shape."""

    @property
    def device_ids(self) -> list[int]:
        """The device ids in logical (row-major) order."""

    @property
    def size(self) -> int:
        """Number of devices."""

    @property
    def ndim(self) -> int:
        """Number of axes."""

    def coordinates(self, logical: int) -> list[int]:
        """Mesh coordinate (one entry per axis) of logical device `logical`."""

    def logical_index(self, device: int) -> int | None:
        """
        Logical position of a device id in the mesh, or None if the mesh lacks it.
        """

    @overload
    def __eq__(self, arg: Mesh, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

class PartitionSpec:
    """
    How each leading array dimension is split over mesh axes, as JAX's
    ``PartitionSpec``: one entry per dimension, each None, an axis name, or a
    tuple of axis names (first axis most significant). Missing trailing
    entries mean not partitioned; specs compare equal without trailing Nones.
    """

    def __init__(self, *entries) -> None:
        """
        ``PartitionSpec('data', None, ('x', 'y'))``. Raises NestedTupleError for a tuple in a tuple.
        """

    @staticmethod
    def parse(text: str) -> PartitionSpec:
        """
        Parses ``None,data,(a,b)`` or JAX's printed ``P('data', None)``. Raises ParseError.
        """

    def __len__(self) -> int: ...

    def __getitem__(self, index: int, /) -> str | tuple[str, ...] | None: ...

    def __iter__(self) -> Iterator[str | tuple[str, ...] | None]: ...

    def to_tuple(self) -> tuple[str | tuple[str, ...] | None, ...]:
        """The entries as a tuple (None, 'x' or ('x', 'y') each)."""

    @property
    def axis_names(self) -> list[str]:
        """Every axis named, in order of appearance."""

    @overload
    def __eq__(self, arg: PartitionSpec, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

class NamedSharding:
    """
    A mesh, a partition spec and a memory kind: which device holds which
    slice of an array, with the semantics of jax.sharding.NamedSharding.
    Devices are integer ids; `uneven=True` opts into XLA's padded tiles.
    """

    def __init__(self, mesh: Mesh, spec: PartitionSpec | Iterable[str | tuple[str, ...] | None], memory_kind: str | None = None, *, uneven: bool = False) -> None:
        """
        `spec` is a PartitionSpec, JAX's ``jax.sharding.PartitionSpec`` (converted: the same entries) or a
        tuple of entries. Raises DuplicateAxisError / UnknownAxisError as JAX does, ParseError for an
        unknown memory kind, InvalidArgumentError for a `spec` of another type.
        """

    @property
    def mesh(self) -> Mesh:
        """The mesh."""

    @property
    def spec(self) -> PartitionSpec:
        """The partition spec."""

    @property
    def memory_kind(self) -> str:
        """'device', 'pinned_host' or 'unpinned_host'."""

    @property
    def uneven(self) -> bool:
        """Whether chunks may be uneven (XLA's padding rule)."""

    def with_memory_kind(self, kind: str) -> NamedSharding:
        """The same sharding in another memory kind."""

    def validate(self, global_shape: Sequence[int]) -> None:
        """
        Raises the typed error of spec/sharding.md if this sharding cannot lay out `global_shape`.
        """

    def devices_indices_map(self, global_shape: Sequence[int]) -> dict[int, tuple[slice, ...]]:
        """
        {device id: index tuple} for every device, as JAX returns it (slice(None) where unsplit).
        """

    def addressable_devices_indices_map(self, global_shape: Sequence[int], topology: Topology, process: int) -> dict[int, tuple[slice, ...]]:
        """devices_indices_map restricted to `process`'s devices."""

    def index_domains(self, global_shape: Sequence[int]) -> list[Box]:
        """The Box each logical device holds, in mesh order."""

    def shard_shape(self, global_shape: Sequence[int]) -> tuple[int, ...] | None:
        """
        The shape of every shard (None in uneven mode, where shards may differ).
        """

    def replica_ids(self, global_shape: Sequence[int]) -> dict[int, int]:
        """
        {device id: replica id}: how many earlier devices (mesh order) hold the same slice.
        """

    def num_chunks(self, rank: int) -> tuple[int, ...]:
        """Chunks per dimension for an array of rank `rank`."""

    def picture(self, global_shape: Sequence[int], labels: Sequence[int | str] | None = None, *, dtype: str | None = None, platform: str = 'CPU', color: bool = False, width: int = 80) -> str | None:
        """
        A text picture of which devices hold which block, as jax.debug.visualize_array_sharding
        draws it (ranks 1 and 2). Other ranks draw the split dimensions only, under a caption that
        names the shape, `dtype` and every dimension; more than two split dimensions give a grid
        of the last two per slice of the others. `labels[i]` names device i (e.g. JAX's device ids
        in a multi-process job; default: the ids); `platform` is the word before a block's labels;
        `color` adds ANSI backgrounds; `width` (1 to 1000) is the columns to fill. None for an empty
        array or one with more than 32 blocks a side or 16 grids. Raises InvalidArgumentError
        naming the argument, or the sharding's error for a shape it cannot lay out.
        """

    @property
    def is_fully_replicated(self) -> bool:
        """Whether every device holds the whole array."""

    def is_fully_addressable(self, topology: Topology, process: int) -> bool:
        """Whether `process` owns every device of the mesh."""

    def addressable_devices(self, topology: Topology, process: int) -> list[int]:
        """The mesh's devices that `process` owns, in mesh order."""

    @property
    def device_set(self) -> set[int]:
        """The set of device ids."""

    @property
    def num_devices(self) -> int:
        """Number of devices."""

    @overload
    def __eq__(self, arg: NamedSharding, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

class Transfer:
    """
    Copy `box` (global coordinates) from source device `src` to target device `dst`.
    """

    @property
    def src(self) -> int:
        """Source device id."""

    @property
    def dst(self) -> int:
        """Target device id."""

    @property
    def box(self) -> Box:
        """The elements moved, in global coordinates."""

    @property
    def stage(self) -> int:
        """
        0: from a source-layout holder; 1: after stage 0, a copy within one process from a target device whose stage-0 transfers brought the box in (so it crosses into the process once).
        """

    @overload
    def __eq__(self, arg: Transfer, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __repr__(self) -> str: ...

class PlanStats:
    """Byte counts of a plan (as `reshard plan --json`)."""

    @property
    def bytes_total(self) -> int:
        """Bytes every target device receives, in all."""

    @property
    def bytes_same_device(self) -> int:
        """Bytes copied within one device."""

    @property
    def bytes_same_process(self) -> int:
        """Bytes between devices of one process."""

    @property
    def bytes_cross_process(self) -> int:
        """Bytes between processes."""

    @property
    def max_process_send_bytes(self) -> int:
        """The most cross-process bytes any one process sends."""

    @property
    def bytes_fan_out(self) -> int:
        """
        Bytes of stage-1 copies (within a process, from a target device that received them in stage 0).
        """

    def to_dict(self) -> dict[str, int]:
        """The counts as a dict."""

    @overload
    def __eq__(self, arg: PlanStats, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __repr__(self) -> str: ...

class PlanOptions:
    """
    How the planner may go beyond each target device fetching its own slice.
    """

    def __init__(self) -> None:
        """The defaults: fan out and balance senders."""

    @property
    def fan_out(self) -> bool:
        """
        A remote piece several devices of one process need crosses into it once; the others copy it (stage 1).
        """

    @fan_out.setter
    def fan_out(self, arg: bool, /) -> None: ...

    @property
    def balance_senders(self) -> bool:
        """
        A piece several processes hold is split over them so the largest sender sends the least.
        """

    @balance_senders.setter
    def balance_senders(self, arg: bool, /) -> None: ...

    def __repr__(self) -> str: ...

class Plan:
    """
    The immutable list of transfers that builds a target layout from a source.
    """

    @property
    def shape(self) -> tuple[int, ...]:
        """The array's global shape."""

    @property
    def dtype(self) -> str:
        """The element type's safetensors name."""

    @property
    def src(self) -> NamedSharding:
        """The source sharding."""

    @property
    def dst(self) -> NamedSharding:
        """The target sharding."""

    @property
    def topology(self) -> Topology:
        """The job's topology."""

    @property
    def transfers(self) -> list[Transfer]:
        """Every transfer, in target mesh order then box order."""

    @property
    def stats(self) -> PlanStats:
        """The plan's byte counts."""

    def __len__(self) -> int: ...

    def validate(self) -> None:
        """
        Checks every target element is covered once by a holder (InvalidPlanError otherwise).
        """

    @overload
    def __eq__(self, arg: Plan, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __repr__(self) -> str: ...

def _plan(shape: Sequence[int], dtype: str, src: NamedSharding, dst: NamedSharding, topology: Topology, options: PlanOptions) -> Plan:
    """
    The plan from `src` to `dst` for an array of `shape` and `dtype` (a safetensors name).
    """

class TensorInfo:
    """One tensor entry of a safetensors header."""

    @property
    def name(self) -> str:
        """The tensor's name."""

    @property
    def dtype(self) -> str:
        """The safetensors dtype name ('F32', 'BF16', ...)."""

    @property
    def shape(self) -> tuple[int, ...]:
        """The tensor's shape."""

    @property
    def data_offsets(self) -> tuple[int, int]:
        """(begin, end) byte offsets into the data buffer."""

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor's data."""

    def __repr__(self) -> str: ...

class SafetensorsFile:
    """
    An open safetensors file whose whole header was validated at open.
    Use reshard.safetensors.safe_open; this is the compiled half.
    """

    @staticmethod
    def open(path: str | os.PathLike, mode: str = 'mmap') -> SafetensorsFile:
        """
        Opens and validates `path` ('mmap' maps it, 'pread' reads on demand). Raises the
        typed format errors of spec/safetensors.md, ReshardIOError when it cannot be read.
        """

    @property
    def path(self) -> pathlib.Path:
        """The file's path."""

    @property
    def mode(self) -> str:
        """'mmap' or 'pread'."""

    @property
    def tensors(self) -> list[TensorInfo]:
        """Every tensor entry, in the order of their bytes in the file."""

    @property
    def metadata(self) -> dict[str, str] | None:
        """`__metadata__` as a dict, or None when the file has none."""

    @property
    def data_start(self) -> int:
        """File offset of the data buffer (8 + header bytes)."""

    def info(self, name: str) -> TensorInfo:
        """The entry of tensor `name` (MissingTensorError if absent)."""

    def __contains__(self, arg: str, /) -> bool: ...

    def _view(self, name: str) -> Annotated[NDArray[numpy.uint8], dict(shape=(None,), writable=False)]:
        """Read-only uint8 view of a tensor's bytes in the mapping (mmap mode)."""

    def _read_into(self, name: str, out: Annotated[NDArray[numpy.uint8], dict(shape=(None,), order='C', device='cpu')]) -> None:
        """Copies a tensor's bytes into `out`."""

    def _read_box_into(self, name: str, box: Box, out: Annotated[NDArray[numpy.uint8], dict(shape=(None,), order='C', device='cpu')]) -> None:
        """Copies the box of a tensor, dense row-major, into `out`."""

class HfFolder:
    """An open, validated Hugging Face folder (use reshard.hf.open_folder)."""

    @staticmethod
    def open(folder: str | os.PathLike, mode: str = 'mmap') -> HfFolder:
        """
        Opens every file of `folder` and checks them against the index, if any.
        """

    @property
    def kind(self) -> str:
        """'single_file', 'indexed' or 'peft_adapter'."""

    @property
    def folder(self) -> pathlib.Path:
        """The folder's path."""

    @property
    def files(self) -> list[SafetensorsFile]:
        """The open safetensors files, in file order."""

    @property
    def file_names(self) -> list[str]:
        """The files' names relative to the folder."""

    @property
    def tensor_files(self) -> dict[str, int]:
        """
        {tensor name: index into files}, in source order (file by file, data order within each).
        """

    @property
    def metadata(self) -> dict[str, str] | None:
        """
        The files' __metadata__ merged in file order (first value wins), or None.
        """

def _write_safetensors(path: str | os.PathLike, tensors: Sequence[tuple[str, str, tuple[int, ...], numpy.ndarray]], metadata: Sequence[tuple[str, str]] | None) -> None:
    """
    Writes (name, dtype, shape, bytes) tensors as a safetensors file, atomically.
    """

def _inspect(path: str | os.PathLike) -> dict[str, Any]:
    """
    What a file, folder or checkpoint holds, as `reshard inspect --json` (without hashes).
    """

def _verify(path: str | os.PathLike) -> dict[str, Any]:
    """
    Reads everything back as `reshard verify` does; the first damage raises its typed error.
    """

class Transport:
    """
    Moves bytes between the processes of a job (an MPI transport, or one rank of an
    InProcessGroup). Operations taking transport= are collective over it.
    """

    @property
    def rank(self) -> int:
        """This process's rank."""

    @property
    def size(self) -> int:
        """The number of processes."""

    @property
    def bytes_sent(self) -> int:
        """Payload bytes this process has sent so far."""

    @property
    def bytes_received(self) -> int:
        """Payload bytes this process has received so far."""

    def barrier(self) -> None:
        """Returns once every process has entered it."""

    def all_gather(self, local: bytes) -> list:
        """
        Collective: every process's `local` bytes, as a list indexed by rank (small
        metadata only: how processes agree before an operation; a silent peer fails it
        after the timeout).
        """

    @property
    def timeout(self) -> float:
        """
        Seconds a peer may stay silent before waits on it fail (TransportTimeoutError).
        """

    @timeout.setter
    def timeout(self, arg: float, /) -> None: ...

class InProcessGroup:
    """
    A job whose processes are threads of this one: transport(rank) is each thread's.
    """

    def __init__(self, size: int) -> None:
        """A group of `size` processes."""

    @property
    def size(self) -> int:
        """The number of processes."""

    def transport(self, rank: int) -> Transport:
        """The transport of process `rank` (lives as long as the group)."""

class Shard:
    """One device's slice of a sharded array."""

    @property
    def device(self) -> int:
        """The device id."""

    @property
    def box(self) -> Box:
        """The slice, in global coordinates."""

    @property
    def writable(self) -> bool:
        """
        Whether the slice's memory may be written (not for a read-only numpy array or a map).
        """

    def _bytes(self) -> object:
        """
        The slice's elements (row-major) as a uint8 array sharing the buffer (read-only if it is).
        """

class _ShardedArray:
    """One process's shards of a global array (see reshard.ShardedArray)."""

    @staticmethod
    def allocate(shape: object, dtype: str, sharding: NamedSharding, topology: Topology, process: int) -> _ShardedArray:
        """This process's shards, allocated and uninitialised."""

    @staticmethod
    def from_shard_bytes(shape: Sequence[int], dtype: str, sharding: NamedSharding, topology: Topology, process: int, shards: Sequence[numpy.ndarray]) -> _ShardedArray:
        """
        This process's shards (mesh order) over the memory of C-contiguous uint8 arrays of
        their bytes, without a copy (read-only where an array is).
        """

    @property
    def shape(self) -> tuple[int, ...]:
        """The global shape."""

    @property
    def dtype(self) -> str:
        """The safetensors dtype name."""

    @property
    def sharding(self) -> NamedSharding:
        """The layout."""

    @property
    def topology(self) -> Topology:
        """The job's topology."""

    @property
    def process(self) -> int:
        """The process whose shards these are."""

    @property
    def shards(self) -> list[Shard]:
        """This process's shards, in mesh order."""

    def shares_memory_with(self, other: _ShardedArray) -> bool:
        """Whether every shard shares its buffer with `other`'s."""

def _reshard(array: _ShardedArray, target: NamedSharding, transport: Transport | None = None) -> _ShardedArray:
    """
    The array laid out by `target` (collective over `transport`; None: one process).
    """

def _reshard_into(array: _ShardedArray, target: _ShardedArray, transport: Transport | None = None) -> None:
    """
    Writes the array into `target`'s shards, laid out as they are (InvalidArgumentError if read-only).
    """

def _to_host(array: _ShardedArray, transport: Transport | None = None) -> numpy.ndarray:
    """
    The whole array's bytes, row-major, as a uint8 numpy array on every process.
    """

def _to_host_root(array: _ShardedArray, root: int, transport: Transport | None = None) -> numpy.ndarray | None:
    """
    The whole array's bytes on process `root` only (None on the others, which send it what it lacks).
    """

def _reshard_arrays(arrays: Sequence[_ShardedArray], targets: Sequence[NamedSharding], transport: Transport | None = None) -> list[_ShardedArray]:
    """Each array laid out by its target, all in one operation."""

def _to_host_arrays(arrays: Sequence[_ShardedArray], transport: Transport | None = None) -> list[numpy.ndarray]:
    """
    Every array's bytes, row-major, as uint8 numpy arrays, in one operation.
    """

def _from_host(bytes: Annotated[NDArray[numpy.uint8], dict(shape=(None,), order='C', device='cpu', writable=False)], shape: object, dtype: str, target: NamedSharding, topology: Topology, transport: Transport | None = None, root: int | None = None) -> _ShardedArray:
    """
    A host array's bytes placed with `target`: each process its shards. Without a root the bytes are whole on every process and nothing is sent; with one only the root's are read and it sends each process its shards' elements.
    """

class SaveStats:
    """What this process did in a save."""

    @property
    def chunks_written(self) -> int:
        """Chunks this process wrote."""

    @property
    def bytes_written(self) -> int:
        """Chunk bytes this process wrote."""

    @property
    def waves(self) -> int:
        """Staging waves (asynchronous saves)."""

    def __repr__(self) -> str: ...

class RestoreStats:
    """What this process read in a restore."""

    @property
    def header_bytes_read(self) -> int:
        """The manifest and data files' headers."""

    @property
    def data_bytes_read(self) -> int:
        """Chunk bytes."""

    def __repr__(self) -> str: ...

class SaveHandle:
    """
    An asynchronous save in progress: wait() for its result, ready() to poll.
    """

    def wait(self) -> SaveStats:
        """
        Blocks (without the GIL) until the save is committed everywhere, or raises its error. Once.
        """

    def ready(self) -> bool:
        """Whether wait() would return at once."""

def _save_checkpoint(path: str | os.PathLike, names: Sequence[str], arrays: Sequence[_ShardedArray], metadata: Sequence[tuple[str, str]] | None, replace: bool, transport: Transport | None = None) -> SaveStats:
    """
    Saves the arrays under their names as a checkpoint folder (collective).
    """

def _save_checkpoint_async(path: str | os.PathLike, names: Sequence[str], arrays: Sequence[_ShardedArray], metadata: Sequence[tuple[str, str]] | None, replace: bool, staging_bytes: int, transport: Transport | None = None) -> SaveHandle:
    """
    Stages the arrays and saves them in the background; the handle keeps the transport alive.
    """

def _restore_checkpoint(path: str | os.PathLike, names: Sequence[str], shardings: Sequence[NamedSharding], topology: Topology, verify_checksums: bool, transport: Transport | None = None) -> tuple[list[_ShardedArray], RestoreStats]:
    """
    The named tensors laid out by their shardings, and what was read (collective).
    """

def _restore_checkpoint_into(path: str | os.PathLike, names: Sequence[str], arrays: Sequence[_ShardedArray], verify_checksums: bool, transport: Transport | None = None) -> RestoreStats:
    """Fills the arrays' shards with the tensors of their names (collective)."""

class ExportResult:
    """What an export wrote."""

    @property
    def tensors(self) -> int:
        """Tensors in the output."""

    @property
    def merged(self) -> int:
        """Weights a LoRA delta was merged into."""

    @property
    def files(self) -> int:
        """Weight files written."""

    @property
    def bytes(self) -> int:
        """Tensor bytes of the output."""

    @property
    def bytes_written(self) -> int:
        """Tensor bytes this process wrote."""

    def __repr__(self) -> str: ...

class ImportResult:
    """What an import produced."""

    @property
    def tensors(self) -> int:
        """Framework tensors produced."""

    @property
    def bytes(self) -> int:
        """Their bytes."""

    @property
    def bytes_read(self) -> int:
        """Source tensor bytes this process read."""

    @property
    def metadata(self) -> dict[str, str]:
        """
        The configs saved as checkpoint metadata (config.json, adapter_config.json).
        """

def _export_checkpoint(checkpoint: str | os.PathLike, out: str | os.PathLike, map: str, kind: str, dtype: str | None, max_shard_size: int, base: str | os.PathLike | None, gather_to: int | None, replace: bool, hf_config_json: str | None, lora_config_json: str | None, transport: Transport | None = None) -> ExportResult:
    """
    Exports a framework-layout checkpoint through a tensor map (collective).
    """

def _export_arrays(names: Sequence[str], arrays: Sequence[_ShardedArray], out: str | os.PathLike, map: str, kind: str, dtype: str | None, max_shard_size: int, base: str | os.PathLike | None, gather_to: int | None, replace: bool, hf_config_json: str | None, lora_config_json: str | None, transport: Transport | None = None) -> ExportResult:
    """Exports sharded arrays through a tensor map (collective)."""

def _import_arrays(hf_dir: str | os.PathLike, map: str, mesh: Mesh, topology: Topology, rules: object | None, best_effort: str | None, strict: bool, dtype: str | None, sizes: Mapping[str, int], base: str | os.PathLike | None, transport: Transport | None = None) -> tuple[list[tuple[str, _ShardedArray]], ImportResult]:
    """Imports a Hugging Face folder as sharded arrays (collective)."""

def _import_checkpoint(hf_dir: str | os.PathLike, checkpoint: str | os.PathLike, map: str, mesh: Mesh, topology: Topology, rules: object | None, best_effort: str | None, strict: bool, dtype: str | None, sizes: Mapping[str, int], base: str | os.PathLike | None, replace: bool, transport: Transport | None = None) -> ImportResult:
    """
    Imports a Hugging Face folder as a framework-layout checkpoint (collective).
    """

class ConvertResult:
    """What a conversion wrote."""

    @property
    def files(self) -> int:
        """Files written (data files for a checkpoint)."""

    @property
    def tensors(self) -> int:
        """Tensors written."""

    @property
    def bytes(self) -> int:
        """Tensor bytes of the output."""

    @property
    def carried(self) -> list[str]:
        """A folder output: the non-weight files written beside the weights."""

    @property
    def warnings(self) -> list[str]:
        """What the output lacks that its users will miss."""

    def __repr__(self) -> str: ...

class MergeLoraSummary:
    """What a LoRA merge wrote."""

    @property
    def tensors(self) -> int:
        """Tensors in the output."""

    @property
    def merged(self) -> int:
        """Weights a LoRA delta was added to."""

    @property
    def files(self) -> int:
        """Weight files written."""

    @property
    def bytes(self) -> int:
        """Tensor bytes written."""

    @property
    def replaced(self) -> int:
        """
        Tensors taken whole from the adapter (modules_to_save, saved base layers).
        """

    @property
    def copied(self) -> list[str]:
        """The base folder's non-weight files carried beside the weights."""

    @property
    def warnings(self) -> list[str]:
        """What the output lacks that its users will miss."""

    def __repr__(self) -> str: ...

def _convert(src: str | os.PathLike, dst: str | os.PathLike, output: str, dtype: str | None, max_shard_size: int, replace: bool, mesh: Mesh | None, topology: Topology | None, rules: str | Sequence[tuple[str, PartitionSpec]] | None, best_effort_axis: str | None, strict: bool, transport: Transport | None = None) -> ConvertResult:
    """
    Converts between a .safetensors file, a Hugging Face folder and a checkpoint (collective).
    """

def _parse_byte_size(text: str) -> int:
    """
    Bytes in a size as the command line takes it ('5GB', '500MB', '1.5GiB'); ParseError otherwise.
    """

def _merge_lora(base: str | os.PathLike, adapter: str | os.PathLike, out: str | os.PathLike, dtype: str | None, max_shard_size: int, replace: bool, chunk_bytes: int) -> MergeLoraSummary:
    """
    Merges a PEFT LoRA adapter into its base model, writing a Hugging Face folder.
    """

_mpi_available: bool = True

def _launched_by_mpi() -> bool:
    """Whether an MPI launcher (mpirun, srun) started this process."""

def _mpi_init(peer_timeout: float) -> None:
    """Initialises MPI (unless already initialised) for the process, once."""

def _mpi_finalize() -> None:
    """
    Closes every MPI transport, then ends the session (MPI_Finalize if it initialised MPI).
    """

def _mpi_owns() -> bool:
    """Whether the session initialised MPI (and so finalises it)."""

def _mpi_thread_level() -> int:
    """The thread level MPI provides (-1 without a session)."""

def _mpi_world_rank() -> int:
    """This process's rank in MPI_COMM_WORLD."""

def _mpi_world_size() -> int:
    """The number of processes in MPI_COMM_WORLD."""

class _MpiTransport(Transport):
    """The transport between MPI processes."""

    def close(self) -> None:
        """
        Releases the transport's MPI resources; using it afterwards is a TransportError.
        """

    @property
    def closed(self) -> bool:
        """Whether close() was called."""

def _mpi_transport(comm: int | None, chunk_bytes: int, max_bytes_in_flight: int, timeout: float) -> _MpiTransport:
    """
    A transport over MPI_COMM_WORLD, or the communicator of handle `comm` (collective).
    """
