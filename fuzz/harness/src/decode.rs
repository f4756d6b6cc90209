//! `decode`: the first byte picks a command, the rest is its request text,
//! run on a fresh store. Every command's request decoder sees every input.
//! The command byte, counted from `H`, is taken modulo the number of
//! commands, so the seeds start with a letter: `H` is `info`, `I`
//! `plan-context`, and so on in the order of `Command::ALL`, to `Y` for
//! `resident-snapshot`, then `Z`, `[` and `\\` for `import-messages`,
//! `render-context` and `validate-request`.

use crate::host::{Call, Checks, Host};
use ctxkernel::Command;

pub fn run(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else { return };
    let command = Command::ALL[usize::from(first.wrapping_sub(b'H')) % Command::ALL.len()];
    let request = String::from_utf8_lossy(rest).into_owned();
    let call = match command {
        // The bytes `put-content` stores are the request's own.
        Command::PutContent => Call::Put(request, rest.to_vec()),
        Command::GetContent => Call::Get(request),
        command => Call::Json(command, request),
    };
    // One call on an empty store: a second kernel would see the same store,
    // so only the read-back is worth its time here.
    Host::new(Checks { cold: false, read_back: true }).call(call);
}

/// The input that makes `run` call `command` with `request`.
pub fn input(command: Command, request: &str) -> Vec<u8> {
    let index = Command::ALL.iter().position(|c| *c == command).expect("a command of the table") as u8;
    let mut data = vec![b'H' + index];
    data.extend_from_slice(request.as_bytes());
    data
}
