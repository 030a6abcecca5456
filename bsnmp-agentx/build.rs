//! Compares the ABI declared in src/abi.rs with bsnmp's real headers, when they are at hand.
//!
//! The headers are looked for in $BSNMP_INCLUDE (a directory holding asn1.h, snmp.h,
//! snmpagent.h and snmpmod.h) and then in /usr/include/bsnmp (FreeBSD's base system). When
//! found, a small C program compiled against them prints every size, offset and enum value
//! the module relies on, as Rust `const` assertions; src/abi.rs includes them, so a mismatch
//! is a compile error. Without headers the generated file only says that nothing was checked.
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const PROBE: &str = r#"
#include <sys/types.h>
#include <sys/queue.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include "snmpmod.h"

#define SZ(T, R) printf("assert!(size_of::<%s>() == %zu, \"size of %s\");\n", R, sizeof(T), #T)
#define OFF(T, F, R, RF) printf("assert!(offset_of!(%s, %s) == %zu, \"offset of %s.%s\");\n", R, RF, offsetof(T, F), #T, #F)
#define VAL(C) printf("assert!(%s == %d, \"value of %s\");\n", #C, (int)(C), #C)

int main(void) {
    printf("const _: () = {\n");
    SZ(struct asn_oid, "asn_oid");
    OFF(struct asn_oid, subs, "asn_oid", "subs");
    SZ(union snmp_values, "snmp_values");
    SZ(struct snmp_value, "snmp_value");
    OFF(struct snmp_value, syntax, "snmp_value", "syntax");
    OFF(struct snmp_value, v, "snmp_value", "v");
    SZ(struct snmp_scratch, "snmp_scratch");
    OFF(struct snmp_scratch, int1, "snmp_scratch", "int1");
    SZ(struct snmp_context, "snmp_context");
    OFF(struct snmp_context, scratch, "snmp_context", "scratch");
    SZ(struct snmp_node, "snmp_node");
    OFF(struct snmp_node, name, "snmp_node", "name");
    OFF(struct snmp_node, type, "snmp_node", "node_type");
    OFF(struct snmp_node, syntax, "snmp_node", "syntax");
    OFF(struct snmp_node, op, "snmp_node", "op");
    OFF(struct snmp_node, flags, "snmp_node", "flags");
    OFF(struct snmp_node, index, "snmp_node", "index");
    OFF(struct snmp_node, data, "snmp_node", "data");
    OFF(struct snmp_node, tree_data, "snmp_node", "tree_data");
    SZ(struct snmp_module, "snmp_module");
    OFF(struct snmp_module, init, "snmp_module", "init");
    OFF(struct snmp_module, fini, "snmp_module", "fini");
    OFF(struct snmp_module, idle, "snmp_module", "idle");
    OFF(struct snmp_module, dump, "snmp_module", "dump");
    OFF(struct snmp_module, config, "snmp_module", "config");
    OFF(struct snmp_module, start, "snmp_module", "start");
    OFF(struct snmp_module, proxy, "snmp_module", "proxy");
    OFF(struct snmp_module, tree, "snmp_module", "tree");
    OFF(struct snmp_module, tree_size, "snmp_module", "tree_size");
    OFF(struct snmp_module, loading, "snmp_module", "loading");
    VAL(SNMP_SYNTAX_NULL); VAL(SNMP_SYNTAX_INTEGER); VAL(SNMP_SYNTAX_OCTETSTRING);
    VAL(SNMP_SYNTAX_OID); VAL(SNMP_SYNTAX_IPADDRESS); VAL(SNMP_SYNTAX_COUNTER);
    VAL(SNMP_SYNTAX_GAUGE); VAL(SNMP_SYNTAX_TIMETICKS); VAL(SNMP_SYNTAX_COUNTER64);
    VAL(SNMP_SYNTAX_NOSUCHOBJECT); VAL(SNMP_SYNTAX_NOSUCHINSTANCE); VAL(SNMP_SYNTAX_ENDOFMIBVIEW);
    VAL(SNMP_NODE_LEAF); VAL(SNMP_NODE_COLUMN); VAL(SNMP_NODE_CANSET);
    VAL(SNMP_OP_GET); VAL(SNMP_OP_GETNEXT); VAL(SNMP_OP_SET); VAL(SNMP_OP_COMMIT);
    VAL(SNMP_OP_ROLLBACK); VAL(ASN_MAXOIDLEN);
    VAL(SNMP_ERR_NOERROR); VAL(SNMP_ERR_NOSUCHNAME); VAL(SNMP_ERR_GENERR);
    VAL(SNMP_ERR_NOT_WRITEABLE); VAL(SNMP_ERR_COMMIT_FAILED); VAL(SNMP_ERR_UNDO_FAILED);
    VAL(SNMP_ERR_WRONG_TYPE); VAL(SNMP_ERR_WRONG_VALUE);
    printf("};\n");
    return 0;
}
"#;

fn headers() -> Option<PathBuf> {
    if let Some(d) = env::var_os("BSNMP_INCLUDE") {
        let d = PathBuf::from(d);
        if d.join("snmpmod.h").exists() {
            return Some(d);
        }
        panic!(
            "BSNMP_INCLUDE={} holds no snmpmod.h: point it at bsnmp's headers",
            d.display()
        );
    }
    let d = Path::new("/usr/include/bsnmp");
    d.join("snmpmod.h").exists().then(|| d.to_path_buf())
}

fn main() {
    println!("cargo:rerun-if-env-changed=BSNMP_INCLUDE");
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    let generated = out.join("bsnmp_layout.rs");
    let same_machine = env::var("TARGET").ok() == env::var("HOST").ok();
    let Some(dir) = headers().filter(|_| same_machine) else {
        fs::write(
            &generated,
            "// No bsnmp headers found (BSNMP_INCLUDE, /usr/include/bsnmp): layout not checked.\n\
             pub const LAYOUT_CHECKED_AGAINST: Option<&str> = None;\n",
        )
        .unwrap();
        return;
    };
    println!("cargo:rerun-if-changed={}", dir.join("snmpmod.h").display());
    let src = out.join("bsnmp_probe.c");
    let exe = out.join("bsnmp_probe");
    fs::write(&src, PROBE).unwrap();
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut cmd = Command::new(&cc);
    cmd.arg("-I").arg(&dir);
    if let Some(extra) = env::var_os("BSNMP_CFLAGS") {
        cmd.args(extra.to_string_lossy().split_whitespace());
    }
    let st = cmd
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("{cc}: {e}"));
    assert!(
        st.success(),
        "compiling the bsnmp layout probe against {} failed",
        dir.display()
    );
    let o = Command::new(&exe)
        .output()
        .expect("run the bsnmp layout probe");
    assert!(o.status.success(), "the bsnmp layout probe failed");
    let mut text = String::from_utf8(o.stdout).unwrap();
    text.push_str(&format!(
        "pub const LAYOUT_CHECKED_AGAINST: Option<&str> = Some({:?});\n",
        dir.display().to_string()
    ));
    fs::write(&generated, text).unwrap();
}
