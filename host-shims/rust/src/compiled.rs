//! The compiled component, cached per user so a process after the first
//! starts in milliseconds instead of compiling the kernel again (about two
//! seconds with Cranelift).
//!
//! An entry is named by what its machine code depends on: the component's
//! sha256 and wasmtime's compatibility hash of this engine (its version,
//! configuration, target and CPU features). It holds a digest of the
//! compiled bytes, checked before wasmtime sees them, because wasmtime runs
//! what it deserializes without checking it: a truncated or damaged entry is
//! compiled again and replaced, never loaded; an entry wasmtime refuses is a
//! rebuild too. The cache is used only while its directory belongs to this
//! user and no one else may write to it, since whoever writes an entry
//! chooses the code this process runs. Entries are written to a temporary
//! file and renamed into place, so concurrent processes only ever read a
//! whole entry; a process killed while writing leaves its temporary file,
//! and entries of components no longer installed stay until the directory
//! is cleared. A cache that cannot be used costs the compile time, nothing
//! else.
//!
//! `CTXKERNEL_CACHE_DIR` moves the cache; set to the empty string, it turns
//! the cache off. The Python host keeps its own entries (of the core module)
//! the same way.

use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use wasmtime::component::Component;
use wasmtime::Engine;

const MAGIC: &[u8] = b"ctxkernel compiled module 1\n";
const DIGEST: usize = 32;

/// Where entries live, or `None` when the cache is off.
pub(crate) fn cache_dir() -> Option<PathBuf> {
    cache_dir_from(std::env::var_os("CTXKERNEL_CACHE_DIR"))
}

fn cache_dir_from(setting: Option<OsString>) -> Option<PathBuf> {
    match setting {
        Some(dir) if dir.is_empty() => None,
        Some(dir) => Some(PathBuf::from(dir)),
        None => dirs::cache_dir().map(|dir| dir.join("ctxkernel")),
    }
}

/// sha256 over what a `Hash` feeds it: a name that stays the same from one
/// Rust release to the next, as `DefaultHasher`'s need not.
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        unreachable!("read with finalize")
    }
}

fn entry_name(engine: &Engine, component_sha256: &str) -> String {
    let mut hasher = Sha256Hasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    let engine_hash = hasher.0.finalize();
    let engine_hash: String = engine_hash[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{component_sha256}-wasmtime-rs-{engine_hash}-{}.bin", std::env::consts::ARCH)
}

/// Whether `dir` belongs to this user and only this user may write to it
/// (on systems with owners and modes).
fn private(dir: &Path, must_exist: bool) -> bool {
    let status = match std::fs::metadata(dir) {
        Ok(status) => status,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return !must_exist,
        Err(e) => {
            eprintln!("ctxkernel: cannot use the compiled-component cache {}: {e}", dir.display());
            return false;
        }
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if status.uid() != me || status.mode() & 0o022 != 0 {
            eprintln!("ctxkernel: not using the compiled-component cache {}: it belongs to another user or others may write to it", dir.display());
            return false;
        }
    }
    #[cfg(not(unix))]
    let _ = status;
    true
}

/// The compiled `component` (whose sha256 is `component_sha256`): from the
/// cache in `dir` when a sound entry is there, else compiled and stored.
pub(crate) fn load(engine: &Engine, component: &[u8], component_sha256: &str, dir: Option<&Path>) -> anyhow::Result<Component> {
    let Some(dir) = dir.filter(|dir| private(dir, false)) else {
        return Ok(Component::new(engine, component)?);
    };
    let path = dir.join(entry_name(engine, component_sha256));
    if let Some(cached) = read(engine, &path) {
        return Ok(cached);
    }
    let compiled = Component::new(engine, component)?;
    if let Err(e) = compiled.serialize().map_err(anyhow::Error::from).and_then(|bytes| write(&path, &bytes)) {
        eprintln!("ctxkernel: cannot write the compiled-component cache entry {}: {e:#}", path.display());
    }
    Ok(compiled)
}

fn read(engine: &Engine, path: &Path) -> Option<Component> {
    let entry = match std::fs::read(path) {
        Ok(entry) => entry,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            eprintln!("ctxkernel: cannot read the compiled-component cache entry {}: {e}", path.display());
            return None;
        }
    };
    let head = MAGIC.len() + DIGEST;
    let sound = entry.len() >= head && entry.starts_with(MAGIC) && entry[MAGIC.len()..head] == Sha256::digest(&entry[head..])[..];
    if !sound {
        eprintln!("ctxkernel: the compiled-component cache entry {} is damaged; compiling again", path.display());
        return None;
    }
    // SAFETY: these are the bytes this host serialized (the digest above
    // holds them to that), under the user's own cache directory; wasmtime
    // checks they were compiled by a compatible engine.
    match unsafe { Component::deserialize(engine, &entry[head..]) } {
        Ok(component) => Some(component),
        Err(e) => {
            eprintln!("ctxkernel: wasmtime refused the compiled-component cache entry {} ({e}); compiling again", path.display());
            None
        }
    }
}

fn write(path: &Path, compiled: &[u8]) -> anyhow::Result<()> {
    let dir = path.parent().expect("an entry's path names its directory");
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.recursive(true).create(dir)?;
    anyhow::ensure!(private(dir, true), "the directory is not this user's alone");
    let mut file = tempfile::Builder::new().prefix(".").suffix(".tmp").tempfile_in(dir)?;
    file.write_all(MAGIC)?;
    file.write_all(&Sha256::digest(compiled))?;
    file.write_all(compiled)?;
    file.as_file().sync_all()?;
    file.persist(path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::COMPONENT;
    use crate::COMPONENT_SHA256;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        names
    }

    #[test]
    fn a_damaged_or_foreign_entry_is_compiled_again_and_replaced_and_a_sound_one_loads() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::default();
        load(&engine, COMPONENT, COMPONENT_SHA256, Some(dir.path())).unwrap();
        let name = entry_name(&engine, COMPONENT_SHA256);
        assert_eq!(entries(dir.path()), [name.clone()]);
        let path = dir.path().join(&name);
        let good = std::fs::read(&path).unwrap();
        assert!(read(&engine, &path).is_some(), "a sound entry loads");
        assert!(load(&engine, b"not wasm", COMPONENT_SHA256, Some(dir.path())).is_ok(), "a sound entry is loaded, not compiled");

        let head = MAGIC.len() + DIGEST;
        let middle = head + (good.len() - head) / 2;
        let mut flipped = good.clone();
        flipped[middle] ^= 1;
        let mut digest_flipped = good.clone();
        digest_flipped[MAGIC.len()] ^= 0x80;
        let garbage = [b"\x7fELF".as_slice(), &[7u8; 4096]].concat();
        let foreign = [MAGIC, &Sha256::digest(&garbage)[..], &garbage].concat();
        for damaged in [flipped, good[..good.len() - 4096].to_vec(), digest_flipped, good[..head].to_vec(), Vec::new(), foreign] {
            std::fs::write(&path, &damaged).unwrap();
            assert!(read(&engine, &path).is_none(), "a damaged entry is never loaded");
            load(&engine, COMPONENT, COMPONENT_SHA256, Some(dir.path())).unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), good, "the entry is rebuilt");
        }
        assert_eq!(entries(dir.path()), [name], "no temporary file is left behind");
    }

    #[test]
    fn an_entry_is_named_by_the_component_and_the_engine() {
        let plain = Engine::default();
        let mut metered = wasmtime::Config::new();
        metered.consume_fuel(true);
        let metered = Engine::new(&metered).unwrap();
        assert_ne!(entry_name(&plain, COMPONENT_SHA256), entry_name(&metered, COMPONENT_SHA256));
        assert_ne!(entry_name(&plain, COMPONENT_SHA256), entry_name(&plain, &"0".repeat(64)));
        assert!(entry_name(&plain, COMPONENT_SHA256).starts_with(COMPONENT_SHA256));
    }

    #[test]
    fn an_empty_setting_turns_the_cache_off() {
        assert_eq!(cache_dir_from(Some("".into())), None);
        assert_eq!(cache_dir_from(Some("/x/y".into())), Some(PathBuf::from("/x/y")));
        assert!(cache_dir_from(None).is_some_and(|dir| dir.ends_with("ctxkernel")));
    }

    #[cfg(unix)]
    #[test]
    fn a_cache_others_may_write_to_is_not_used() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::default();
        load(&engine, COMPONENT, COMPONENT_SHA256, Some(dir.path())).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(load(&engine, b"not wasm", COMPONENT_SHA256, Some(dir.path())).is_err(), "the entry was not read: it compiled");
        assert!(load(&engine, COMPONENT, COMPONENT_SHA256, Some(dir.path())).is_ok());
    }

    #[test]
    fn a_write_that_fails_after_its_temporary_file_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::default();
        let in_the_way = dir.path().join(entry_name(&engine, COMPONENT_SHA256));
        std::fs::create_dir(&in_the_way).unwrap();
        std::fs::write(in_the_way.join("a-file"), "so the rename fails").unwrap();
        assert!(load(&engine, COMPONENT, COMPONENT_SHA256, Some(dir.path())).is_ok());
        assert_eq!(entries(dir.path()), [entry_name(&engine, COMPONENT_SHA256)]);
    }

    #[test]
    fn a_cache_that_cannot_be_written_costs_only_the_compile() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("a-file");
        std::fs::write(&blocker, "not a directory").unwrap();
        let engine = Engine::default();
        assert!(load(&engine, COMPONENT, COMPONENT_SHA256, Some(&blocker.join("cache"))).is_ok());
    }
}
