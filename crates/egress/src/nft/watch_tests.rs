use super::*;

/// One nftables notification: header, nfgenmsg, then string attributes.
fn message(kind: u16, family: u8, attrs: &[(u16, &str)]) -> Vec<u8> {
    let mut body = vec![family, 0, 0, 0];
    for (ty, value) in attrs {
        let len = 4 + value.len() + 1;
        body.extend_from_slice(&u16::try_from(len).unwrap().to_ne_bytes());
        body.extend_from_slice(&ty.to_ne_bytes());
        body.extend_from_slice(value.as_bytes());
        body.push(0);
        body.resize(body.len().next_multiple_of(4), 0);
    }
    let len = u32::try_from(NLMSG_HDRLEN + body.len()).unwrap();
    let mut out = Vec::new();
    out.extend_from_slice(&len.to_ne_bytes());
    out.extend_from_slice(&((SUBSYS_NFTABLES << 8) | kind).to_ne_bytes());
    out.extend_from_slice(&[0; 10]);
    out.extend_from_slice(&body);
    out
}

fn none() -> HashSet<String> {
    HashSet::new()
}

#[test]
fn a_deleted_table_rule_and_flushed_set_of_corral_are_changes() {
    let t = message(2, NFPROTO_INET, &[(1, "corral")]);
    assert_eq!(
        first_change(&t, &none()),
        Some(NftChange {
            object: NftObject::Table,
            deleted: true,
            family: "inet",
            set: None
        })
    );
    let r = message(8, NFPROTO_BRIDGE, &[(1, "corral"), (2, "fwd")]);
    let got = first_change(&r, &none()).unwrap();
    assert_eq!(
        (got.object, got.deleted, got.family),
        (NftObject::Rule, true, "bridge")
    );
    let e = message(14, NFPROTO_INET, &[(1, "corral"), (2, "dev-allow4")]);
    let got = first_change(&e, &none()).unwrap();
    assert_eq!(got.object, NftObject::Elements);
    assert_eq!(got.set.as_deref(), Some("dev-allow4"));
}

#[test]
fn other_tables_families_and_generation_messages_are_not() {
    assert_eq!(
        first_change(&message(2, NFPROTO_INET, &[(1, "filter")]), &none()),
        None
    );
    assert_eq!(
        first_change(&message(2, NFPROTO_INET, &[(1, "corral2")]), &none()),
        None
    );
    // ip (2) family: corral has no table there.
    assert_eq!(
        first_change(&message(2, 2, &[(1, "corral")]), &none()),
        None
    );
    // NEWGEN (15) names a process, not a table.
    assert_eq!(
        first_change(&message(15, 0, &[(1, "corral")]), &none()),
        None
    );
    // A GET (1) is a request echo, not a change.
    assert_eq!(
        first_change(&message(1, NFPROTO_INET, &[(1, "corral")]), &none()),
        None
    );
    // Another subsystem (conntrack is 1).
    let mut ct = message(0, NFPROTO_INET, &[(1, "corral")]);
    ct[5] = 1;
    assert_eq!(first_change(&ct, &none()), None);
}

#[test]
fn elements_of_learned_sets_are_skipped_but_the_set_itself_is_not() {
    let learned: HashSet<String> = ["dev-dns4".to_owned()].into();
    let add = message(12, NFPROTO_INET, &[(1, "corral"), (2, "dev-dns4")]);
    assert_eq!(first_change(&add, &learned), None);
    let del = message(11, NFPROTO_INET, &[(1, "corral"), (2, "dev-dns4")]);
    assert_eq!(first_change(&del, &learned).unwrap().object, NftObject::Set);
    let other = message(12, NFPROTO_INET, &[(1, "corral"), (2, "dev-allow4")]);
    assert!(first_change(&other, &learned).is_some());
}

#[test]
fn the_widest_change_of_a_datagram_is_reported_past_unrelated_messages() {
    let mut d = message(15, 0, &[]);
    d.extend(message(12, NFPROTO_INET, &[(1, "filter"), (2, "x")]));
    d.extend(message(8, NFPROTO_INET, &[(1, "corral"), (2, "dev-out")]));
    d.extend(message(5, NFPROTO_INET, &[(1, "corral"), (3, "dev-out")]));
    let got = first_change(&d, &none()).unwrap();
    assert_eq!((got.object, got.deleted), (NftObject::Chain, true));
    // A truncated tail is not read past; what came before it still counts.
    let cut = &d[..d.len() - 3];
    assert_eq!(first_change(cut, &none()).unwrap().object, NftObject::Rule);
}
