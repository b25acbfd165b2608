//! The `llamay` command: argument parsing and terminal output only.

fn main() {
    println!("llamay");
}
