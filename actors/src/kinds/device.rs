//! The device kind: its query constructors (no parents, no key).

simple_kind!(
    "device",
    list_devices,
    read_device,
    inconsistent_read_device,
    upsert_device,
    delete_device
);
