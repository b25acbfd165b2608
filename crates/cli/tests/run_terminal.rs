//! `llamay run MODEL` in a real terminal: tmux runs it, `send-keys` types, and
//! `capture-pane` reads what a person would see. Two turns where the second needs the
//! first, a JSON turn, Ctrl-C during a long reply, `/bye`, and the history file.
//! (`.ci/run` installs tmux from Debian's packages.)

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use llamay_testdata::{real_model, RealModel};

struct Tmux {
    socket: PathBuf,
    dir: PathBuf,
}

impl Tmux {
    /// `command` in a fresh tmux server of its own (its socket in `dir`), wide enough
    /// that the replies seldom wrap.
    fn start(dir: &Path, command: &str) -> Tmux {
        let socket = dir.join("tmux.sock");
        let t = Tmux {
            socket,
            dir: dir.to_path_buf(),
        };
        let status = t
            .cmd()
            .args(["new-session", "-d", "-s", "chat", "-x", "220", "-y", "50"])
            .arg(command)
            .status()
            .expect("tmux runs: install it (Debian package tmux), as .ci/run does");
        assert!(status.success(), "tmux new-session failed");
        t
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.socket);
        c
    }

    fn send(&self, keys: &[&str]) {
        let ok = self
            .cmd()
            .args(["send-keys", "-t", "chat"])
            .args(keys)
            .status()
            .unwrap()
            .success();
        assert!(ok, "send-keys {keys:?}");
    }

    /// Types a line as a person would, then Enter.
    fn line(&self, text: &str) {
        self.send(&["-l", text]);
        self.send(&["Enter"]);
    }

    /// The whole pane, scrollback included, wrapped lines joined.
    fn screen(&self) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-J", "-S", "-", "-t", "chat"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool, limit: Duration) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            assert!(
                start.elapsed() < limit,
                "waited {limit:?} for {what}; the screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends a message and waits for the reply to end: the statistics line and a
    /// fresh prompt after it.
    fn turn(&self, message: &str) -> Reply {
        let before = prompts(&self.screen());
        self.line(message);
        let s = self.wait_for(
            "the reply and the next prompt",
            |s| prompts(s) > before && s.trim_end().ends_with(">>>"),
            Duration::from_secs(120),
        );
        Reply::after(&s, message)
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn prompts(screen: &str) -> usize {
    screen.lines().filter(|l| l.starts_with(">>>")).count()
}

/// One reply as the screen shows it: the text after `>>> message`, up to the
/// statistics line that `--verbose` prints.
#[derive(Debug)]
struct Reply {
    text: String,
    prompt_tokens: usize,
    generated: usize,
    stop: String,
}

impl Reply {
    fn after(screen: &str, message: &str) -> Reply {
        let start = screen
            .rfind(&format!(">>> {message}"))
            .unwrap_or_else(|| panic!("{message:?} not on the screen:\n{screen}"));
        let rest = &screen[start..];
        let mut lines = rest.lines().skip(1);
        let mut text = Vec::new();
        let stats = loop {
            let l = lines
                .next()
                .unwrap_or_else(|| panic!("no statistics line after {message:?}:\n{rest}"));
            if l.starts_with("prompt ") && l.contains(" · stop: ") {
                break l.to_string();
            }
            text.push(l);
        };
        let words: Vec<&str> = stats.split_whitespace().collect();
        let num = |after: &str| -> usize {
            let i = words.iter().position(|w| *w == after).unwrap();
            words[i + 1].parse().unwrap()
        };
        Reply {
            text: text.join("\n").trim().to_string(),
            prompt_tokens: num("prompt"),
            generated: num("generated"),
            stop: stats.rsplit_once("stop: ").unwrap().1.trim().to_string(),
        }
    }
}

#[test]
fn a_chat_at_the_terminal() {
    let model = real_model(RealModel::SmolLM2);
    let dir = std::env::temp_dir().join(format!("llamay-terminal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let history = dir.join("history");
    // LLAMAY_HOST names a port nothing listens on: the model runs in this process
    // whatever else runs on the machine. `; echo EXIT=$?` keeps the exit code on screen.
    let command = format!(
        "env HOME={dir} LLAMAY_HISTORY={history} LLAMAY_HOST=127.0.0.1:9 {bin} run {model} \
         --temp 0 -n 48 --verbose; echo EXIT=$?; sleep 600",
        dir = dir.display(),
        history = history.display(),
        bin = env!("CARGO_BIN_EXE_llamay"),
        model = model.display(),
    );
    let t = Tmux::start(&dir, &command);
    t.wait_for(
        "the first prompt",
        |s| s.contains("/? for help") && s.trim_end().ends_with(">>>"),
        Duration::from_secs(60),
    );

    // Two turns: the second is answered from the first.
    let first = t.turn("My name is Zorblax. Remember it.");
    let second = t.turn("What is my name?");
    assert!(!first.text.is_empty(), "{first:?}");
    assert!(
        second.prompt_tokens >= first.prompt_tokens + first.generated,
        "the second prompt does not hold the first turn: {first:?} then {second:?}"
    );
    assert!(second.text.contains("Zorblax"), "{second:?}");

    // JSON mode: the reply parses.
    t.line("/set format json");
    t.wait_for(
        "the format change",
        |s| s.contains("Replies are constrained to json."),
        Duration::from_secs(10),
    );
    let json = t.turn("Describe a cat in a few words.");
    serde_json::from_str::<serde_json::Value>(&json.text)
        .unwrap_or_else(|e| panic!("the JSON reply does not parse ({e}): {json:?}"));
    t.line("/unset format");

    // Ctrl-C stops a long reply and the chat goes on.
    t.line("/set parameter num_predict 2000");
    t.wait_for(
        "the setting",
        |s| s.contains("Set parameter 'num_predict' to '2000'.") && s.trim_end().ends_with(">>>"),
        Duration::from_secs(10),
    );
    let long = "Write a very long story about a dragon and a knight.";
    let before = prompts(&t.screen());
    t.line(long);
    t.wait_for(
        "the story to start",
        |s| {
            s.rfind(long)
                .is_some_and(|i| s[i..].lines().nth(1).is_some_and(|l| l.len() > 10))
        },
        Duration::from_secs(60),
    );
    t.send(&["C-c"]);
    let s = t.wait_for(
        "the prompt after Ctrl-C",
        |s| prompts(s) > before && s.trim_end().ends_with(">>>"),
        Duration::from_secs(20),
    );
    let cancelled = Reply::after(&s, long);
    assert_eq!(cancelled.stop, "cancelled", "{cancelled:?}");
    assert!(cancelled.generated < 2000, "{cancelled:?}");
    // Still chatting after it.
    t.line("/set parameter num_predict 48");
    // The setting's own prompt must be on the screen before the next turn counts
    // prompts, or that prompt passes for the reply's end.
    t.wait_for(
        "the setting",
        |s| s.contains("Set parameter 'num_predict' to '48'.") && s.trim_end().ends_with(">>>"),
        Duration::from_secs(10),
    );
    let after = t.turn("Say hello.");
    assert!(!after.text.is_empty(), "{after:?}");

    t.line("/bye");
    let s = t.wait_for(
        "the chat to end",
        |s| s.contains("EXIT="),
        Duration::from_secs(20),
    );
    assert!(s.contains("EXIT=0"), "{s}");

    let kept = std::fs::read_to_string(&history).expect("the history file was written");
    for line in ["What is my name?", "/set format json", "Say hello.", "/bye"] {
        assert!(
            kept.lines().any(|l| l == line),
            "{line:?} not in the history:\n{kept}"
        );
    }
}
