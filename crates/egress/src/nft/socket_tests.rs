use super::*;

#[test]
fn splits_messages_and_reads_error_codes() {
    let mut buf = vec![0u32; 16];
    // Two NLMSG_ERROR messages of 20 bytes: error -2 (seq 7) and ack (seq 8).
    let words: [u32; 10] = [
        20,
        libc::NLMSG_ERROR as u32,
        7,
        0,
        (-2i32) as u32,
        20,
        libc::NLMSG_ERROR as u32,
        8,
        0,
        0,
    ];
    buf[..10].copy_from_slice(&words);
    let ms = messages(&buf, 40);
    assert_eq!(ms.len(), 2);
    assert_eq!((ms[0].seq, error_code(&ms[0])), (7, -2));
    assert_eq!((ms[1].seq, error_code(&ms[1])), (8, 0));
    // A truncated tail is ignored, not read past.
    assert_eq!(messages(&buf, 30).len(), 1);
}

/// `n` netlink messages of 20 bytes (header + errno) as u32 words.
fn errors(msgs: &[(u32, u32, i32)]) -> Vec<u32> {
    let mut w = Vec::new();
    for &(seq, pid, code) in msgs {
        w.extend_from_slice(&[20, libc::NLMSG_ERROR as u32, seq, pid, code as u32]);
    }
    w
}

fn finished(objects: usize) -> Finished {
    let mut b = super::super::batch::Batch::new();
    let t = super::super::obj::Table::new().unwrap();
    for i in 0..objects {
        b.table(
            super::super::batch::Op::Add,
            libc::NFPROTO_INET as u16,
            &t,
            format!("adding table {i}"),
        );
    }
    b.finish()
}

fn take_all(a: &mut Answers, words: &[u32]) {
    for m in messages(words, words.len() * 4) {
        a.take(&m);
    }
}

#[test]
fn only_the_final_ack_of_our_batch_ends_a_commit() {
    // Begin 1, objects 2..=4, end 5; the last object (4) carries the ACK.
    let f = finished(3);
    assert_eq!((f.last_seq, f.end_seq), (Some(4), 5));
    let me = 4242;
    let mut a = Answers::new(me, &f);
    // An ACK for another socket, and one for a sequence number we never
    // sent, are not answers to this batch.
    take_all(&mut a, &errors(&[(4, 999, 0), (77, me, 0), (4, 999, -1)]));
    assert!(!a.done && a.first_error.is_none(), "{a:?}");
    // A read that ends before the final ACK is not success.
    take_all(&mut a, &errors(&[(2, me, 0)]));
    assert!(!a.done, "a partial read is not a commit");
    take_all(&mut a, &errors(&[(4, me, 0)]));
    assert!(a.done && a.first_error.is_none());
    // The end message's ACK (kernels ≥ 6.10) ends it as well.
    let mut a = Answers::new(me, &f);
    take_all(&mut a, &errors(&[(5, me, 0)]));
    assert!(a.done);
}

#[test]
fn the_first_error_of_our_batch_is_kept() {
    let f = finished(3);
    let me = 7;
    let mut a = Answers::new(me, &f);
    take_all(&mut a, &errors(&[(3, 8, -17), (3, me, -2), (4, me, -22)]));
    assert_eq!(
        a.first_error,
        Some((3, -2)),
        "another socket's error is not ours"
    );
    assert!(a.done);
    assert_eq!(f.note(3), "adding table 1");
}

#[test]
fn a_refused_batch_is_not_sent() {
    let mut f = finished(1);
    f.overflow = Some(super::super::batch::Overflow {
        what: "adding elements".into(),
        len: 1 << 20,
        room: 1 << 17,
    });
    // No socket is needed: the refusal comes before any send.
    let sock = NlSocket::open().unwrap();
    let e = sock.commit(&f).unwrap_err();
    assert!(matches!(e, NftError::MessageTooLarge { .. }), "{e}");
}

#[test]
fn a_read_nobody_answers_times_out() {
    // Bound, never sent to: nothing will ever arrive.
    let mut sock = NlSocket::open().unwrap();
    sock.timeout = Duration::from_millis(200);
    sock.set_timeout(sock.timeout).unwrap();
    let mut buf = vec![0u32; 1024];
    let t0 = std::time::Instant::now();
    let e = sock
        .recv_or_timeout(&mut buf, "reading nftables tables")
        .unwrap_err();
    let took = t0.elapsed();
    assert!(matches!(e, NftError::Timeout { .. }), "{e}");
    assert!(e.to_string().contains("reading nftables tables"), "{e}");
    assert!(
        took >= Duration::from_millis(150) && took < Duration::from_secs(5),
        "{took:?}"
    );
}

/// A GETTABLE dump request (all families) with `seq`.
fn get_tables(buf: *mut libc::c_char, seq: u32) -> *mut libc::nlmsghdr {
    // SAFETY: `buf` is the 64 KiB request buffer `dump` hands over.
    unsafe {
        nftnl_sys::nftnl_nlmsg_build_hdr(
            buf,
            libc::NFT_MSG_GETTABLE as u16,
            libc::NFPROTO_UNSPEC as u16,
            libc::NLM_F_DUMP as u16,
            seq,
        )
    }
}

/// Commit one batch adding tables `names` (inet) and deleting none.
fn add_tables(sock: &NlSocket, names: &[&str]) -> Result<(), NftError> {
    let mut b = super::super::batch::Batch::new();
    for n in names {
        let mut t = super::super::obj::Table::new().unwrap();
        t.set_str(
            nftnl_sys::NFTNL_TABLE_NAME,
            &super::super::obj::cstr(n).unwrap(),
        );
        b.table(
            super::super::batch::Op::Add,
            libc::NFPROTO_INET as u16,
            &t,
            format!("adding table {n}"),
        );
    }
    sock.commit(&b.finish())
}

#[test]
fn a_dump_skips_answers_to_an_earlier_request() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let ns = crate::netns::Netns::new().unwrap();
    ns.run(|| {
        let sock = NlSocket::open().unwrap();
        add_tables(&sock, &["a", "b"]).unwrap();
        let count = |sock: &NlSocket| {
            let mut n = 0;
            sock.dump("tables", get_tables, |_| {
                n += 1;
                Ok(())
            })
            .unwrap();
            n
        };
        assert_eq!(count(&sock), 2, "the commit waited for its ACK and took");
        // An earlier request whose answers (the generation, then an
        // ACK) are still queued: read as ours, the generation message
        // would be handed to `each` as a table.
        let mut req = vec![0u32; 1024];
        let stale = sock.dump_seq.get().wrapping_sub(100);
        // SAFETY: `req` is 4 KiB, room for a bare header.
        let h = unsafe {
            nftnl_sys::nftnl_nlmsg_build_hdr(
                req.as_mut_ptr().cast(),
                libc::NFT_MSG_GETGEN as u16,
                libc::NFPROTO_UNSPEC as u16,
                libc::NLM_F_ACK as u16,
                stale,
            )
        };
        // SAFETY: the header was just written into `req`.
        let len = unsafe { (*h).nlmsg_len } as usize;
        // SAFETY: `len` bytes of `req` were written.
        let bytes = unsafe { std::slice::from_raw_parts(req.as_ptr().cast::<u8>(), len) };
        sock.sock.send(bytes).unwrap();
        assert_eq!(count(&sock), 2);
        let mut buf = vec![0u32; RECV_BUF / 4];
        let left = sock.recv(&mut buf, libc::MSG_DONTWAIT);
        assert!(
            matches!(&left, Err(e) if e.kind() == io::ErrorKind::WouldBlock),
            "the dump read its own answers to the end: {left:?}"
        );
    })
    .unwrap();
}

#[test]
fn a_rejected_commit_names_the_failing_message() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let ns = crate::netns::Netns::new().unwrap();
    ns.run(|| {
        let sock = NlSocket::open().unwrap();
        // A table name longer than NFT_NAME_MAXLEN is refused (ERANGE
        // or EINVAL); the ACK of the last message comes after it.
        let long = "x".repeat(300);
        let e = add_tables(&sock, &["ok", &long, "last"]).unwrap_err();
        match &e {
            NftError::Rejected { what, .. } => {
                assert_eq!(what, &format!("adding table {long}"), "{e}")
            }
            other => panic!("expected a rejection, got {other}"),
        }
        let mut n = 0;
        sock.dump("tables", get_tables, |_| {
            n += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 0, "the whole transaction was aborted");
    })
    .unwrap();
}
