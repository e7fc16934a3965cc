"""reshard's exceptions: one class per C++ error name (each code, each file-format rule), under ReshardError.

Every error the C++ library raises arrives as the class registered here for its
code, with the C++ message unchanged (it names the spec, axis, file or tensor at
fault). Bad layouts and arguments are ``ValueError`` subclasses, I/O failures
``OSError``, so code written for either catches reshard's too.
"""

from __future__ import annotations

from . import _core


class ReshardError(Exception):
    """Base of every reshard error. ``code`` is the C++ ErrorCode's name; ``kind``, on an error the
    library raised, the C++ ErrorKind's name: the class's ``code``, or a finer one where a layer
    names a case of its own (``"no_lora_config"``, ``"part_size_out_of_range"``), so that callers
    decide by it, never by the message's text."""

    code: str = ""
    kind: str = ""


class LayoutError(ReshardError, ValueError):
    """A mesh, partition spec or sharding that does not fit, by JAX's rules."""


class InvalidArgumentError(ReshardError, ValueError):
    """A value passed in makes no sense."""

    code = "invalid_argument"


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of a type reshard does not take (also a ``TypeError``); the message names the argument."""


class ParseError(ReshardError, ValueError):
    """Text (a spec, a dtype, a memory kind, a size) could not be parsed."""

    code = "parse"


class SizeOverflowError(ReshardError, ValueError, OverflowError):
    """A size or offset computed from input does not fit in 64 bits."""

    code = "overflow"


class IndivisibleError(LayoutError):
    """A dimension is not divisible by the number of chunks its spec entry asks for."""

    code = "indivisible"


class DuplicateAxisError(LayoutError):
    """A mesh axis is used twice in one partition spec."""

    code = "duplicate_axis"


class UnknownAxisError(LayoutError):
    """A partition spec names an axis the mesh does not have."""

    code = "unknown_axis"


class RankError(LayoutError):
    """A partition spec has more entries than the array has dimensions."""

    code = "rank"


class NestedTupleError(LayoutError):
    """A partition spec entry is a tuple inside a tuple."""

    code = "nested_tuple"


class InvalidMeshError(LayoutError):
    """A mesh with bad axes or devices (sizes, repeats, device count)."""

    code = "invalid_mesh"


class UnknownDeviceError(LayoutError):
    """A device id the topology (or the array) does not have."""

    code = "unknown_device"


class InvalidPlanError(ReshardError, ValueError):
    """A plan that does not build its target layout."""

    code = "invalid_plan"


class TransportError(ReshardError, RuntimeError):
    """Moving bytes between processes failed."""

    code = "transport"


class TransportTimeoutError(ReshardError, TimeoutError):
    """A wait between processes ran past the transport's timeout."""

    code = "timeout"


class PeerFailedError(ReshardError, RuntimeError):
    """Another process of the job failed, so this one stopped."""

    code = "peer_failed"


class ReshardIOError(ReshardError, OSError):
    """A file could not be opened, read, written or mapped."""

    code = "io"


class StorageError(ReshardIOError):
    """An object store (``s3://``, ``gs://``) refused or failed a request; each subclass says how.

    The message names the object or bucket and, for a refusal, where the
    credentials came from, never a key, token or signature. No code of its own:
    catch it for any store failure.
    """


class ObjectNotFoundError(StorageError, FileNotFoundError):
    """No object at the key asked for (also a ``FileNotFoundError``, as a missing local file is)."""

    code = "object_not_found"


class BucketNotFoundError(StorageError, FileNotFoundError):
    """The bucket does not exist (also a ``FileNotFoundError``)."""

    code = "bucket_not_found"


class AccessDeniedError(StorageError, PermissionError):
    """The store refused the credentials (HTTP 401/403); also a ``PermissionError``."""

    code = "access_denied"


class StoreUnreachableError(StorageError, ConnectionError):
    """The store's endpoint did not answer, or kept failing past the retries (also a ``ConnectionError``)."""

    code = "store_unreachable"


class StoreError(StorageError):
    """Any other refusal of the store: the message has the HTTP status and the store's own error code."""

    code = "store_error"


class FormatError(ReshardError, ValueError):
    """A file's contents are not what reshard can take (each subclass says how)."""


class InvalidFileError(FormatError):
    """A file breaks a rule of its format; each rule has a subclass of its own (HeaderTooSmallError, ...)."""

    code = "invalid_file"


class HeaderTooSmallError(InvalidFileError):
    """The file is shorter than the 8-byte header length."""

    code = "header_too_small"


class HeaderTooLargeError(InvalidFileError):
    """The header length passes the format's limit."""

    code = "header_too_large"


class InvalidHeaderLengthError(InvalidFileError):
    """The header length points past the end of the file."""

    code = "invalid_header_length"


class InvalidHeaderUtf8Error(InvalidFileError):
    """The header is not valid UTF-8."""

    code = "invalid_header_utf8"


class InvalidHeaderJsonError(InvalidFileError):
    """The header is not the JSON the format asks for."""

    code = "invalid_header_json"


class InvalidOffsetError(InvalidFileError):
    """A tensor's data offsets are not contiguous with the others'."""

    code = "invalid_offset"


class ValidationOverflowError(InvalidFileError):
    """A tensor's size or offsets overflow."""

    code = "validation_overflow"


class InvalidTensorInfoError(InvalidFileError):
    """A tensor's byte size does not match its dtype and shape."""

    code = "invalid_tensor_info"


class IncompleteBufferError(InvalidFileError):
    """The data buffer's size does not match the tensors."""

    code = "incomplete_buffer"


class DuplicateTensorError(FormatError):
    """Two tensors have the same name."""

    code = "duplicate_tensor"


class MissingTensorError(FormatError, KeyError):
    """No tensor of that name (also a KeyError, as a dict lookup would raise)."""

    code = "missing_tensor"

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class InvalidIndexError(InvalidFileError):
    """A Hugging Face index file that does not match its folder."""

    code = "invalid_index"


class UnsupportedError(ReshardError, ValueError):
    """An operation reshard does not do for these values (e.g. sub-byte dtypes)."""

    code = "unsupported"


class MisalignedSliceError(InvalidFileError):
    """A slice of a sub-byte tensor whose bits do not fill whole bytes."""

    code = "misaligned_slice"


class InvalidManifestError(InvalidFileError):
    """A checkpoint manifest that is malformed, inconsistent or of an unknown version."""

    code = "invalid_manifest"


class ChecksumMismatchError(FormatError):
    """Stored bytes whose checksum differs from the one recorded for them (a damaged checkpoint)."""

    code = "checksum_mismatch"


class AlreadyExistsError(InvalidArgumentError, FileExistsError):
    """The output (a file, folder or checkpoint) is there and replacing it was not asked for.

    Also a ``FileExistsError``, and an ``InvalidArgumentError`` as before. The
    C++ message names no command-line flag; this class adds the Python advice.
    """

    code = "already_exists"

    def __str__(self) -> str:
        return f"{super().__str__()} (pass replace=True to replace it)"


class ReshardWarning(UserWarning):
    """Base of reshard's warnings: something done as asked that may not be what was meant."""


class MissingConfigWarning(ReshardWarning):
    """A Hugging Face folder was written without a config.json (none was given, and none was in the checkpoint)."""


class UnfinishedUploadsWarning(ReshardWarning):
    """inspect or verify found what killed writers left beside the path (staging, unfinished uploads)."""


class InvalidConfigError(FormatError):
    """An input file of settings (config.json, adapter_config.json, a map or rules file) that is malformed."""

    code = "invalid_config"


class NotOrbaxCheckpointError(FormatError):
    """A folder that is not an Orbax PyTree checkpoint (no or malformed _METADATA), for reshard.orbax."""


class IncompleteCheckpointError(FormatError):
    """A checkpoint whose save never committed (Orbax: no commit_success.txt, or a .orbax-checkpoint-tmp name)."""


class UnsupportedDtypeError(UnsupportedError):
    """A stored element type reshard has no dtype for (reshard.orbax names the tensor)."""


class UnsupportedDriverError(UnsupportedError):
    """A stored array format reshard.orbax does not read (zarr and zarr3, in folders or OCDBT, only)."""


def _classes_by_code() -> dict[str, type[ReshardError]]:
    classes: dict[str, type[ReshardError]] = {}
    pending: list[type] = [ReshardError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__dict__.get("code"):
            classes[cls.code] = cls
    return classes


_BY_CODE = _classes_by_code()
_missing = set(_core._error_code_names()) - set(_BY_CODE)
if _missing:  # a new C++ code without a class here: fail loudly at import
    raise ImportError(f"reshard.errors has no class for errors {sorted(_missing)}")
_core._register_error_classes(_BY_CODE)

__all__ = [name for name, value in dict(globals()).items()
           if isinstance(value, type) and issubclass(value, (ReshardError, ReshardWarning))]
