//! Every template of Ollama's own set (`../shared/ollama-templates`), rendered for the
//! three conversations Ollama's tests use, equals the text Ollama renders, byte for byte.

use llamay_runtime::{ChatMessage, OllamaTemplate};
use llamay_testdata::shared_dir;

/// The messages of a case file's name, as Ollama's template tests define them.
fn conversation(case: &str) -> Vec<ChatMessage> {
    let user = ChatMessage::new("user", "Hello, how are you?");
    let assistant = ChatMessage::new("assistant", "I'm doing great. How can I help you today?");
    let user2 = ChatMessage::new("user", "I'd like to show off how chat templating works!");
    let system = ChatMessage::new("system", "You are a helpful assistant.");
    match case {
        "user" => vec![user],
        "user-assistant-user" => vec![user, assistant, user2],
        "system-user-assistant-user" => vec![system, user, assistant, user2],
        other => panic!("no conversation is defined for the case {other:?}"),
    }
}

#[test]
fn every_ollama_template_renders_what_ollama_renders() {
    let dir = shared_dir().join("ollama-templates");
    let mut templates: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "gotmpl"))
        .collect();
    templates.sort();
    assert!(templates.len() >= 20, "{} templates", templates.len());
    let mut cases = 0;
    let mut failures = Vec::new();
    for path in &templates {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let source = std::fs::read_to_string(path).unwrap();
        let t = OllamaTemplate::new(&source, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        let case_dir = dir.join("testdata").join(&name);
        let mut case_files: Vec<_> = std::fs::read_dir(&case_dir)
            .unwrap_or_else(|e| panic!("{}: {e}", case_dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        case_files.sort();
        assert_eq!(case_files.len(), 3, "{name}");
        for case in case_files {
            let case_name = case.file_name().unwrap().to_string_lossy().into_owned();
            let want = std::fs::read_to_string(&case).unwrap();
            let got = t
                .render(&conversation(&case_name), None)
                .unwrap_or_else(|e| panic!("{name}/{case_name}: {e}"));
            cases += 1;
            if got != want {
                failures.push(format!(
                    "{name}/{case_name}:\n--- want\n{want:?}\n--- got\n{got:?}"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {cases} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(cases, templates.len() * 3);
}
