//! The storageClass kind: its query constructors (no parents, no key).

simple_kind!(
    "storageClass",
    list_storage_classes,
    read_storage_class,
    inconsistent_read_storage_class,
    upsert_storage_class,
    delete_storage_class
);
