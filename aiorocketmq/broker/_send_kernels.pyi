# The compiled twin of broker.plain_send.py_plain_send_fields (_send_kernels.pyx).
def plain_send_fields(
    fields: dict[str, str], cluster: str, max_properties_size: int, names: tuple[str, ...]
) -> tuple[str, int, int, int, int, int, dict[str, str], str] | None: ...
