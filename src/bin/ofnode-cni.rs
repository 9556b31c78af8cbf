//! `ofnode-cni`: the CNI plugin. The runtime executes it with the `CNI_*` environment and the
//! network configuration on stdin; it prints the result (or the error object) on stdout.

use std::io::{Read, Write};
use std::process::ExitCode;

use ofnode::cni::{self, CniError, Outcome};

/// A network configuration is a few kilobytes; refuse to read without bound.
const MAX_CONFIG: u64 = 1 << 20;

fn main() -> ExitCode {
    let outcome = match read_stdin() {
        Ok(stdin) => match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime.block_on(cni::run(|name| std::env::var(name).ok(), &stdin)),
            Err(err) => failed(CniError::Io(format!(
                "cannot start the async runtime: {err}"
            ))),
        },
        Err(err) => failed(err),
    };
    let (document, code) = match outcome {
        Outcome::Print(value) => (Some(value), ExitCode::SUCCESS),
        Outcome::Silent => (None, ExitCode::SUCCESS),
        Outcome::Failed(error) => (serde_json::to_value(&error).ok(), ExitCode::FAILURE),
    };
    if let Some(document) = document {
        let mut stdout = std::io::stdout().lock();
        let _ = serde_json::to_writer(&mut stdout, &document);
        let _ = stdout.write_all(b"\n");
    }
    code
}

fn read_stdin() -> Result<Vec<u8>, CniError> {
    let mut stdin = Vec::new();
    std::io::stdin()
        .take(MAX_CONFIG + 1)
        .read_to_end(&mut stdin)
        .map_err(|e| CniError::Io(format!("reading stdin: {e}")))?;
    if stdin.len() as u64 > MAX_CONFIG {
        return Err(CniError::Decode(format!(
            "the configuration is larger than {MAX_CONFIG} bytes"
        )));
    }
    Ok(stdin)
}

fn failed(err: CniError) -> Outcome {
    Outcome::Failed(err.to_object(&cni::VersionInfo::this_plugin().cni_version, &[]))
}
