use super::*;

#[test]
fn exec_answer_keeps_bytes_exact() {
    let a = ExecAnswer::from(ExecOutput {
        exit_code: 3,
        stdout: b"hi\xff".to_vec(),
        stderr: Vec::new(),
        truncated: false,
    });
    assert_eq!(a.stdout, "hi\u{fffd}");
    assert_eq!(a.stdout_base64, "aGn/");
    assert_eq!(a.stderr_base64, "");
}

#[test]
fn a_create_request_is_a_container_with_what_it_names() {
    let n = new_sandbox(CreateRequest {
        name: "a1".into(),
        template: None,
        image: Some("img".into()),
        profile: Some("internet".into()),
        resources: Resources::default(),
        from: None,
        target: Some("m2".into()),
        ttl_secs: Some(3600),
        idle_stop_secs: None,
    });
    assert_eq!(n.instance_type, InstanceType::Container);
    assert_eq!(n.profile.as_deref(), Some("internet"));
    assert_eq!(n.target.as_deref(), Some("m2"));
    assert_eq!((n.ttl_secs, n.idle_stop_secs), (Some(3600), None));
}
