//! What each table of br0 is for, as the seed's `ovsController` lays them out
//! (../shared/seeds/ovscontroller.go.txt, SetupOVS). One place: the trace's text and JSON both
//! name tables from here.

/// `(table, name)`, in table order.
pub const TABLES: &[(u8, &str)] = &[
    (0, "classify"),
    (10, "VXLAN ingress"),
    (20, "from pod"),
    (21, "conntrack"),
    (22, "ANP egress"),
    (23, "BANP egress"),
    (25, "from service"),
    (30, "routing"),
    (40, "ARP to local"),
    (50, "ARP to remote"),
    (60, "service"),
    (70, "IP to local"),
    (80, "policy"),
    (81, "network policy"),
    (82, "ANP ingress"),
    (83, "BANP ingress"),
    (90, "IP to remote"),
    (100, "egress policy"),
    (110, "multicast out"),
    (111, "multicast to remote"),
    (120, "multicast to local"),
    (253, "version"),
];

/// The name of `table`, or None for a table the seed does not use.
pub fn table_name(table: u8) -> Option<&'static str> {
    TABLES
        .binary_search_by_key(&table, |(id, _)| *id)
        .ok()
        .and_then(|index| TABLES.get(index))
        .map(|(_, name)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_found_by_table_and_unknown_tables_have_none() {
        assert!(
            TABLES.windows(2).all(|w| w[0].0 < w[1].0),
            "sorted, no duplicates"
        );
        assert_eq!(table_name(0), Some("classify"));
        assert_eq!(table_name(90), Some("IP to remote"));
        assert_eq!(table_name(253), Some("version"));
        assert_eq!(table_name(5), None);
    }
}
