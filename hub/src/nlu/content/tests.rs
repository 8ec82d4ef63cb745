//! Unit tests of loading and validating NLU content.

use super::*;

#[test]
fn text_syntax() {
    assert_eq!(
        parse_text("turn on the {device:device}").expect("ok"),
        [
            Piece::Text("turn on the ".into()),
            Piece::Slot {
                name: "device".into(),
                kind: "device".into()
            }
        ]
    );
    for (bad, expect) in [
        ("turn on {device:device", "without a matching `}`"),
        ("turn on device}", "without a matching `{`"),
        ("turn on {device}", "`{name:type}`"),
        ("turn on {Device:device}", "must match"),
        ("turn on {de vice:device}", "must match"),
        ("turn on{device:device}", "separated"),
        ("turn on {device:device}s", "separated"),
        ("turn on {a:{b:c}}", "cannot nest"),
        ("", "1 to 160"),
        ("a\nb", "control"),
    ] {
        let err = parse_text(bad).expect_err(bad).to_string();
        assert!(err.contains(expect), "{bad}: {err}");
    }
    assert_eq!(parse_text("{a:b} and {c:d}").expect("ok").len(), 3);
    let long = "x".repeat(161);
    assert!(parse_text(&long).is_err());
}

#[test]
fn ids_refs_and_locales() {
    for ok in ["device:lamp.kitchen", "room:living_room", "scene:a-1"] {
        assert!(valid_ref(ok), "{ok}");
    }
    for bad in [
        "lamp",
        "Device:x",
        "device:",
        ":x",
        "device:Lamp",
        "device:x y",
    ] {
        assert!(!valid_ref(bad), "{bad}");
    }
    for ok in ["en", "ru", "ru-RU"] {
        assert!(valid_locale(ok), "{ok}");
    }
    for bad in ["EN", "eng", "ru_RU", "ru-ru", ""] {
        assert!(!valid_locale(bad), "{bad}");
    }
}

#[test]
fn fingerprints_cover_every_field_and_ignore_nothing_else() {
    let t = Template {
        template_id: "en.x".into(),
        locale: "en".into(),
        intent: "i".into(),
        text: "do {a:b}".into(),
        examples: vec!["do it".into()],
    };
    let fp = t.fingerprint();
    assert!(fp.starts_with("sha256:") && fp.len() == 7 + 64, "{fp}");
    assert_eq!(fp, t.clone().fingerprint(), "stable");
    let expected = format!(
        "sha256:{}",
        hex::encode(Sha256::digest(mcp_shared::canonical::to_vec(&t.to_json())))
    );
    assert_eq!(fp, expected);
    let mut other = t.clone();
    other.examples.push("again".into());
    assert_ne!(other.fingerprint(), fp);
    let mut other = t.clone();
    other.text = "do {a:b} now".into();
    assert_ne!(other.fingerprint(), fp);
    let mut other = t;
    other.locale = "en-GB".into();
    assert_ne!(other.fingerprint(), fp);
}
