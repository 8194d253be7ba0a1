//! A file we write whole, OpenCode's plugin or Pi's extension, known as ours by a marker on its first
//! line: a file of that name without it is the user's and is never written over nor removed.

use anyhow::Context;
use std::path::Path;

/// What is at a marked file's path.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    Missing,
    /// Ours, with its text.
    Ours(String),
    /// A file of that name that we did not write.
    Theirs,
}

/// How one kind of marked file is told, written and refused.
pub(crate) struct MarkedFile {
    /// Whether a file's text is one we wrote (its marker).
    pub is_ours: fn(&str) -> bool,
    /// Writes the whole file atomically.
    pub write: fn(&Path, &str) -> anyhow::Result<()>,
    /// Why install leaves a file of that name that is not ours as it is.
    pub refusal: fn(&Path) -> String,
}

impl MarkedFile {
    pub(crate) fn inspect(&self, file: &Path) -> anyhow::Result<Found> {
        match std::fs::read(file) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                Ok(if (self.is_ours)(&text) { Found::Ours(text) } else { Found::Theirs })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Found::Missing),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", file.display())),
        }
    }

    /// Writes `text`; `Ok(false)`: it was there already. A file that is not ours is refused.
    pub(crate) fn install(&self, file: &Path, text: &str) -> anyhow::Result<bool> {
        match self.inspect(file)? {
            Found::Ours(old) if old == text => return Ok(false),
            Found::Theirs => anyhow::bail!((self.refusal)(file)),
            Found::Ours(_) | Found::Missing => {}
        }
        (self.write)(file, text)?;
        Ok(true)
    }

    /// Removes the file if it is ours; answers what was there.
    pub(crate) fn remove(&self, file: &Path) -> anyhow::Result<Found> {
        let found = self.inspect(file)?;
        if let Found::Ours(_) = found {
            std::fs::remove_file(file).with_context(|| format!("cannot remove {}", file.display()))?;
        }
        Ok(found)
    }
}

/// The line `hooks install|uninstall` prints for a marked file (`noun`: what it is to the CLI), after
/// the `action` `changed` it or not.
pub(crate) fn outcome(cli: &str, file: &Path, noun: &str, action: &str, changed: bool) -> String {
    let what = match (action, changed) {
        ("install", true) => "installed",
        ("install", false) => "already installed",
        (_, true) => "removed",
        (_, false) => "was not installed",
    };
    format!("{cli} {}: sessionwatch {noun} {what}", file.display())
}

#[cfg(test)]
mod tests {
    use super::outcome;
    use std::path::Path;

    /// The words `hooks install|uninstall opencode|pi` have always printed.
    #[test]
    fn the_outcome_says_what_install_and_uninstall_did() {
        let cases = [
            ("install", true, "installed"),
            ("install", false, "already installed"),
            ("uninstall", true, "removed"),
            ("uninstall", false, "was not installed"),
        ];
        for (action, changed, said) in cases {
            assert_eq!(
                outcome("pi", Path::new("/p/sessionwatch.ts"), "extension", action, changed),
                format!("pi /p/sessionwatch.ts: sessionwatch extension {said}")
            );
        }
    }
}
