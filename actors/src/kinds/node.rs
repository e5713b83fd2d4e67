//! The node kind: its query constructors (no parents, no key).

simple_kind!(
    "node",
    list_nodes,
    read_node,
    inconsistent_read_node,
    upsert_node,
    delete_node
);
