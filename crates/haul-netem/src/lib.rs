//! Userspace WAN link emulator between network namespaces.
