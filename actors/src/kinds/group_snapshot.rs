//! The groupSnapshot kind: its query constructors (no parents, no key).

simple_kind!(
    "groupSnapshot",
    list_group_snapshots,
    read_group_snapshot,
    inconsistent_read_group_snapshot,
    upsert_group_snapshot,
    delete_group_snapshot
);
