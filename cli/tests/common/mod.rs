//! What the CLI integration tests share: running the built `geopriv`
//! binary as a pipeline would.
#![allow(dead_code)] // each test file uses a part

use std::io::Write;
use std::process::{Child, Command, Output, Stdio};

/// Starts `geopriv args...` with `stdin` fed from another thread (the child
/// may fill its stdout pipe before it has read all of its input, or exit
/// early on bad flags and close its stdin).
pub fn spawn(args: &[&str], stdin: Vec<u8>) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_geopriv"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the geopriv binary runs");
    let mut pipe = child.stdin.take().unwrap();
    std::thread::spawn(move || {
        let _ = pipe.write_all(&stdin);
    });
    child
}

/// Runs `geopriv args...` on `stdin` to completion.
pub fn geopriv(args: &[&str], stdin: &[u8]) -> Output {
    spawn(args, stdin.to_vec()).wait_with_output().unwrap()
}
