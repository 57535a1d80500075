"""The book build's kernels talk over encrypted sockets (no "running over TCP without encryption").

ipykernel (since its CurveZMQ support, ipykernel PR 1515) logs "Kernel is running over TCP without
encryption ..." when a kernel's messages travel as plain text over TCP; `make book` printed it once
per executed notebook. The fix jupyter_client offers is manager-side: with
``KernelManager.transport_encryption = "auto"`` the manager generates CurveZMQ keys for a kernel
whose kernelspec declares ``"supported_encryption": ["curve"]`` (ipykernel's does; tools/setup.sh
installs it) and writes them into the connection file, so the kernel encrypts and says nothing.

myst-nb (through jupyter-cache and nbclient) creates its kernel managers with an empty
configuration, so no Jupyter config file reaches them: this extension sets the setting's default
in the build process, which is the only process it loads in. Where pyzmq has no CurveZMQ (libzmq
without libsodium), the kernels use the ``ipc`` transport instead (Unix sockets in Jupyter's
runtime folder, no network port); on Windows, which has neither, nothing changes. Other
warnings of the kernels stay visible.
"""

from __future__ import annotations

import os


def secure_kernel_transport() -> str:
    """Set the build's kernel transport; return what was chosen ("curve", "ipc" or "tcp")."""
    import zmq
    from jupyter_client.connect import ConnectionFileMixin
    from jupyter_client.manager import KernelManager

    traits = KernelManager.class_traits()
    if "transport_encryption" in traits and zmq.has("curve"):
        traits["transport_encryption"].default_value = "auto"
        return "curve"
    if os.name == "posix":  # no keys to provision: no TCP either
        ConnectionFileMixin.class_traits()["transport"].default_value = "ipc"
        return "ipc"
    return "tcp"


def setup(app):
    secure_kernel_transport()
    return {"parallel_read_safe": True, "parallel_write_safe": True}
