//! Guest-side network helpers for tests and tools: give a sandbox's only
//! NIC a static IPv4 address when no DHCP server serves its bridge.

use std::net::Ipv4Addr;

use corral_sandbox_core::sandbox::{ExecRequest, ProviderError, Sandbox};
use ipnet::Ipv4Net;

/// The guest commands that put `address` on `eth0` with `gateway` as the
/// default route (each an argv, run without a shell).
pub fn static_ipv4_commands(address: Ipv4Net, gateway: Ipv4Addr) -> Vec<Vec<String>> {
    let argv = |parts: &[&str]| parts.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    vec![
        argv(&["ip", "link", "set", "eth0", "up"]),
        argv(&["ip", "addr", "replace", &address.to_string(), "dev", "eth0"]),
        argv(&[
            "ip",
            "route",
            "replace",
            "default",
            "via",
            &gateway.to_string(),
            "dev",
            "eth0",
        ]),
    ]
}

/// Configure `eth0` of the running `sandbox` statically (needs `ip` in the
/// guest; busybox has it).
pub async fn assign_static_ipv4(
    sandbox: &dyn Sandbox,
    address: Ipv4Net,
    gateway: Ipv4Addr,
) -> Result<(), ProviderError> {
    for argv in static_ipv4_commands(address, gateway) {
        let out = sandbox.exec(&ExecRequest::new(argv.clone())).await?;
        if !out.success() {
            return Err(ProviderError::Backend {
                kind: sandbox.kind(),
                operation: format!("{argv:?} in {}", sandbox.name()),
                message: out.stderr_text().trim().to_owned(),
                code: Some(i64::from(out.exit_code)),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_name_eth0_and_the_gateway() {
        let net: Ipv4Net = "10.99.2.10/24".parse().unwrap_or_else(|e| panic!("{e}"));
        let cmds = static_ipv4_commands(net, Ipv4Addr::new(10, 99, 2, 1));
        assert_eq!(
            cmds[1],
            ["ip", "addr", "replace", "10.99.2.10/24", "dev", "eth0"]
        );
        assert_eq!(cmds[2][5], "10.99.2.1");
    }
}
