//! The autogrowPolicy kind: its query constructors (no parents, no key).

simple_kind!(
    "autogrowPolicy",
    list_autogrow_policies,
    read_autogrow_policy,
    inconsistent_read_autogrow_policy,
    upsert_autogrow_policy,
    delete_autogrow_policy
);
