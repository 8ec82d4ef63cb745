//! Tests of the phrase matcher against the shipped example content (config/nlu/).

use super::*;
use crate::nlu::tests::example_content;

fn check(phrase: &str, locale: Option<&str>) -> Value {
    let content = example_content();
    Index::build(&content)
        .check(&content, phrase, locale)
        .unwrap_or_else(|e| panic!("{phrase}: {e}"))
}

fn top(answer: &Value) -> (&str, f64) {
    let r = &answer["ranking"][0];
    (
        r["template_id"]
            .as_str()
            .unwrap_or_else(|| panic!("no ranking: {answer}")),
        r["score"].as_f64().unwrap_or_default(),
    )
}

fn refs(answer: &Value) -> Vec<&str> {
    answer["entities"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["canonical_ref"].as_str())
        .collect()
}

#[test]
fn english_aliases_and_plurals_resolve_to_one_ref() {
    for phrase in [
        "Turn on the kitchen lamp",
        "turn on the KITCHEN LIGHT!",
        "turn on the lamp in the kitchen",
        "turn on the kitchen lamps",
    ] {
        let a = check(phrase, Some("en"));
        assert_eq!(top(&a), ("en.device.turn_on", 1.0), "{phrase}: {a}");
        assert_eq!(refs(&a), ["device:lamp.kitchen"], "{phrase}");
        let preview = &a["action_preview"];
        assert_eq!(preview["arguments"]["device"], "device:lamp.kitchen");
        assert_eq!(preview["arguments"]["power"], "on");
        assert_eq!(preview["executes"], false);
        assert_eq!(preview["tool"], "home.set_power");
    }
}

#[test]
fn russian_inflected_forms_resolve_to_one_ref() {
    for phrase in [
        "Включи лампу на кухне",
        "включи кухонную лампу",
        "включите лампа на кухне",
        "включи, пожалуйста, лампу на кухне",
    ] {
        let a = check(phrase, Some("ru"));
        assert_eq!(a["ranking"][0]["intent"], "device.turn_on", "{phrase}: {a}");
        assert_eq!(refs(&a), ["device:lamp.kitchen"], "{phrase}: {a}");
        assert_eq!(
            a["action_preview"]["arguments"]["device"],
            "device:lamp.kitchen"
        );
    }
    // ё folds to е: "ёлка" is written with е in the content.
    let a = check("Выключи ЁЛКУ", None);
    assert_eq!(a["locale"], "ru");
    assert_eq!(top(&a).0, "ru.device.turn_off", "{a}");
    assert_eq!(refs(&a), ["device:tree.living_room"]);
    // Every Russian form of the bedroom lamp names the same entity.
    for phrase in [
        "выключи ночник",
        "выключи лампу в спальне",
        "выключи ночника",
    ] {
        assert_eq!(
            refs(&check(phrase, None)),
            ["device:lamp.bedroom"],
            "{phrase}"
        );
    }
}

#[test]
fn the_same_entity_in_both_locales() {
    let en = check("switch off the telly", None);
    let ru = check("выключи телевизор", None);
    assert_eq!(
        (en["locale"].as_str(), ru["locale"].as_str()),
        (Some("en"), Some("ru"))
    );
    assert_eq!(refs(&en), refs(&ru));
    assert_eq!(refs(&en), ["device:tv.living_room"]);
    assert_eq!(
        en["action_preview"]["arguments"],
        ru["action_preview"]["arguments"]
    );
}

#[test]
fn ambiguous_phrases_rank_deterministically() {
    // "свет на кухне" is both the kitchen lamp (device template) and the kitchen (room
    // template): equal scores, ordered by template_id.
    let a = check("включи свет на кухне", Some("ru"));
    let ids: Vec<(&str, f64)> = a["ranking"]
        .as_array()
        .expect("ranking")
        .iter()
        .map(|r| {
            (
                r["template_id"].as_str().unwrap_or(""),
                r["score"].as_f64().unwrap_or(0.0),
            )
        })
        .take(2)
        .collect();
    assert_eq!(
        ids,
        [("ru.device.turn_on", 1.0), ("ru.room.lights_on", 1.0)],
        "{a}"
    );
    // A word missing from both "turn on the" and "switch on the": a tie at 0.75.
    let a = check("on the kitchen lamp", Some("en"));
    let ids: Vec<&str> = a["ranking"]
        .as_array()
        .expect("ranking")
        .iter()
        .filter_map(|r| r["template_id"].as_str())
        .collect();
    assert_eq!(
        &ids[..2],
        ["en.device.switch_on", "en.device.turn_on"],
        "{a}"
    );
    assert_eq!(a["ranking"][0]["score"], a["ranking"][1]["score"]);
    // "lamp" names two lamps: the smaller ref, the other as an alternative.
    let a = check("turn on the lamp", Some("en"));
    assert_eq!(refs(&a), ["device:lamp.bedroom"]);
    assert_eq!(
        a["entities"][0]["alternatives"],
        json!(["device:lamp.kitchen"])
    );
    // The same answer whatever the order templates were loaded in.
    let content = example_content();
    let mut reversed = content.clone();
    let ids: Vec<String> = reversed.templates.keys().rev().cloned().collect();
    let templates = std::mem::take(&mut reversed.templates);
    for id in ids {
        if let Some(t) = templates.get(&id) {
            reversed.templates.insert(id, t.clone());
        }
    }
    for phrase in [
        "включи свет на кухне",
        "on the kitchen lamp",
        "turn on the lamp",
    ] {
        assert_eq!(
            Index::build(&content).check(&content, phrase, None),
            Index::build(&reversed).check(&reversed, phrase, None),
        );
    }
}

#[test]
fn unknown_phrases_give_an_empty_ranking_with_a_trace() {
    for phrase in [
        "what is the weather like tomorrow",
        "!!!",
        "какая завтра погода",
    ] {
        let a = check(phrase, None);
        assert_eq!(a["ranking"], json!([]), "{phrase}: {a}");
        assert_eq!(a["entities"], json!([]));
        assert_eq!(a["action_preview"], Value::Null);
        let steps: Vec<&str> = a["trace"]
            .as_array()
            .expect("trace")
            .iter()
            .filter_map(|t| t["step"].as_str())
            .collect();
        assert!(
            steps.starts_with(&["locale", "normalize", "stem"]),
            "{steps:?}"
        );
        assert_eq!(steps.last(), Some(&"rank"));
    }
    let content = example_content();
    let err = Index::build(&content)
        .check(&content, "hello", Some("de"))
        .expect_err("no German templates")
        .to_string();
    assert!(err.contains("en, ru"), "{err}");
    assert_eq!(
        check("turn on the kitchen lamp", Some("en-GB"))["locale"],
        "en",
        "same language"
    );
}

#[test]
fn unfilled_slots_are_reported_not_guessed() {
    let a = check("turn on the fridge", Some("en"));
    assert_eq!(top(&a).0, "en.device.turn_on", "{a}");
    assert_eq!(a["entities"], json!([]));
    assert_eq!(a["action_preview"]["missing_slots"], json!(["device"]));
    assert!(a["action_preview"]["arguments"].get("device").is_none());
}

#[test]
fn examples_generalize_over_entities() {
    // "could you light up the X" is only an example of en.device.turn_on ("light up the
    // bedroom lamp"); the example's entity became a slot.
    let a = check("light up the telly", Some("en"));
    assert_eq!(top(&a), ("en.device.turn_on", 1.0), "{a}");
    assert_eq!(a["ranking"][0]["pattern"], "example 1");
    assert_eq!(refs(&a), ["device:tv.living_room"]);
}

/// Garbage never panics and never ranks unless it contains a template's words.
#[test]
fn garbage_phrases_never_panic() {
    let content = example_content();
    let index = Index::build(&content);
    let alphabet: Vec<char> =
        "abc xyzАБВ ёЁлампу{}:\u{0}\u{301}\u{1F600}\u{200B}!?.,'’-\t\n日本語🙂ſK"
            .chars()
            .collect();
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..2_000 {
        let len = (next() % 120) as usize;
        let phrase: String = (0..len)
            .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
            .collect();
        for locale in [None, Some("en"), Some("ru")] {
            if let Ok(a) = index.check(&content, &phrase, locale) {
                assert!(
                    a["ranking"]
                        .as_array()
                        .is_some_and(|r| r.len() <= MAX_RANKING)
                );
            }
        }
    }
    let long = "лампа ".repeat(MAX_PHRASE_WORDS + 1);
    assert!(index.check(&content, &long, None).is_err());
}
