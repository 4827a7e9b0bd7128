//! Templates end to end with the real `corral` binary against the real Incus
//! daemon: listed, shown and checked, and a template reaching a busybox
//! sandbox (no cloud-init) through the file API. Instances are force-deleted
//! by a guard when the test ends.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::sandboxes::{Cleanup, cat, in_state, incus, incus_status, instance, unique};
use common::{corral, schema};
use corral_provider_incus::TEST_IMAGE_ALIAS;
use std::os::unix::fs::PermissionsExt as _;

#[test]
fn templates_are_listed_shown_and_checked() {
    let list = corral(&["templates", "--json"]).expect_code(0).json();
    assert_eq!(list["schema"], "corral.templates.v1");
    schema::check(&list);
    let names: Vec<&str> = list["templates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for want in ["blank", "claude", "codex"] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
    let human = corral(&["templates"]).expect_code(0);
    assert!(human.stdout.contains("claude"), "{}", human.stdout);

    let one = corral(&["templates", "codex", "--profile", "internet", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(one["schema"], "corral.template.v1");
    schema::check(&one);
    let user_data = one["rendered"]["user_data"].as_str().unwrap();
    assert!(user_data.starts_with("#cloud-config\n"), "{user_data}");
    assert!(user_data.contains("@openai/codex"), "{user_data}");
    let context = one["rendered"]["context"].as_str().unwrap();
    for word in ["Isolated.", "Disposable.", "Credential-free.", "`internet`"] {
        assert!(context.contains(word), "{word}: {context}");
    }

    let run = corral(&["templates", "nope"]).expect_code(2);
    assert!(
        run.stderr
            .contains("template `nope` does not exist; templates: blank, claude, codex"),
        "{}",
        run.stderr
    );

    // An operator's template beside the configuration: listed; one that
    // carries a credential is refused with its file and line.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("corral.toml");
    std::fs::write(
        &config,
        "[[profile]]\nname = \"web\"\nbridge = \"cdoc-tpl\"\nsubnet = \"10.251.99.0/24\"\nmode = \"internet\"\n",
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("templates")).unwrap();
    let mine = dir.path().join("templates/mine.toml");
    std::fs::write(
        &mine,
        "description = \"mine\"\nimage = \"corral-test\"\nuser = \"dev\"\n[context]\npath = \"/home/dev/AGENTS.md\"\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let list = corral(&["templates", "--json", "--config", config])
        .expect_code(0)
        .json();
    assert!(
        list["templates"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "mine" && t["source"]["kind"] == "file"),
        "{list}"
    );
    std::fs::write(
        &mine,
        "description = \"mine\"\nimage = \"corral-test\"\nuser = \"dev\"\ninstall = [\"echo OPENAI_API_KEY=sk-proj-AAAAAAAAAAAAAAAAAAAAAAAA >> /etc/environment\"]\n[context]\npath = \"/home/dev/AGENTS.md\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o644)).unwrap();
    let run = corral(&["templates", "--config", config]).expect_code(2);
    assert!(
        run.stderr.contains("mine.toml:4: install[0]"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("no credentials"), "{}", run.stderr);
    assert!(
        !run.stderr.contains("AAAAAAAA"),
        "the refusal must not repeat the secret: {}",
        run.stderr
    );
}

#[test]
fn a_template_reaches_a_sandbox_without_cloud_init_through_the_file_api() {
    let Some(client) = incus() else { return };
    let state = tempfile::tempdir().unwrap();
    let (name, never) = (unique("tpl"), unique("tpl-never"));
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone(), never.clone()],
    };
    let run = in_state(
        state.path(),
        &[
            "new",
            &never,
            "--no-network",
            "--template",
            "nope",
            "--image",
            TEST_IMAGE_ALIAS,
        ],
    )
    .expect_code(2);
    assert!(run.stderr.contains("template `nope`"), "{}", run.stderr);
    assert_eq!(incus_status(&client, &never), None);

    let made = in_state(
        state.path(),
        &[
            "new",
            &name,
            "--no-network",
            "--template",
            "claude",
            "--image",
            TEST_IMAGE_ALIAS,
            "--json",
        ],
    )
    .expect_code(0)
    .json();
    schema::check(&made);
    assert_eq!(made["template"]["name"], "claude", "{made}");
    assert_eq!(made["template"]["by"], "file-api", "{made}");
    let not_applied = made["template"]["not_applied"].to_string();
    assert!(not_applied.contains("nodejs"), "{made}");
    // The template's resources (medium), the caller's image.
    let inst = instance(&client, &name).unwrap();
    assert_eq!(inst.config.get("limits.cpu").map(String::as_str), Some("2"));
    assert!(
        inst.config
            .get("cloud-init.user-data")
            .is_some_and(|u| u.contains("claude-code")),
        "the user-data went to the backend anyway"
    );
    let context = cat(&name, "/home/agent/.claude/CLAUDE.md");
    for word in [
        "Isolated.",
        "Disposable.",
        "Credential-free.",
        "no network at all",
    ] {
        assert!(context.contains(word), "{word}: {context}");
    }
    let events = in_state(state.path(), &["events", "--sandbox", &name, "--json"])
        .expect_code(0)
        .json();
    assert_eq!(events["events"][0]["template"], "claude", "{events}");
}
