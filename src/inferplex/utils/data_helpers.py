"""``openvino.utils.data_helpers``'s public name: :class:`OVDict`, the type of a request's results."""

from inferplex._binding import OVDict

__all__ = ["OVDict"]
