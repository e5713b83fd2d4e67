//! The real kubectl against the embedded cluster: apply a CRD and an instance, get with printer
//! columns, describe, patch --type merge and --type json, delete with a finalizer pending and
//! then removed, `get -w` observing an update, a schema violation refused.
//! Skipped (with a printed reason) when no kubectl is on PATH.

use crate::tools::{cluster_and_kubectl, write};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Color, type: string, jsonPath: .spec.color}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1}
              color: {type: string, default: blue, enum: [blue, red]}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"#;

const WIDGET: &str =
    "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 3}\n";
const BAD: &str =
    "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: bad}\nspec: {size: 0}\n";

#[tokio::test]
async fn kubectl_drives_the_embedded_cluster() {
    let Some((c, k, dir)) = cluster_and_kubectl().await else {
        return;
    };
    let crd = write(dir.path(), "crd.yaml", CRD);
    let widget = write(dir.path(), "widget.yaml", WIDGET);
    let bad = write(dir.path(), "bad.yaml", BAD);

    assert!(k.ok(&["apply", "-f", &crd]).await.contains("created"));
    assert!(
        k.ok(&["apply", "-f", &widget])
            .await
            .contains("widget.example.com/w1 created")
    );

    // printer columns, defaults applied
    let table = k.ok(&["get", "widgets"]).await;
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "SIZE", "COLOR", "AGE"]);
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], ["w1", "3", "blue"]);
    assert!(
        k.ok(&["get", "wd", "w1", "-o", "name"])
            .await
            .contains("widget.example.com/w1")
    );

    let described = k.ok(&["describe", "widget", "w1"]).await;
    assert!(described.contains("Name:         w1"), "{described}");
    assert!(described.contains("Size:"), "{described}");

    k.ok(&[
        "patch",
        "widget",
        "w1",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"size":5}}"#,
    ])
    .await;
    k.ok(&[
        "patch",
        "widget",
        "w1",
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/spec/color","value":"red"}]"#,
    ])
    .await;
    assert_eq!(
        k.ok(&[
            "get",
            "widget",
            "w1",
            "-o",
            "jsonpath={.spec.size} {.spec.color}"
        ])
        .await,
        "5 red"
    );

    // a schema violation is refused and names the field
    let refused = k.run(&["apply", "-f", &bad]).await;
    assert!(!refused.ok);
    assert!(refused.stderr.contains("spec.size"), "{}", refused.stderr);

    // kubectl asks for strict field validation: unknown fields are refused, not pruned
    let typo = write(
        dir.path(),
        "typo.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: typo}\nspec: {size: 2, colour: red}\n",
    );
    let refused = k.run(&["apply", "-f", &typo]).await;
    assert!(
        !refused.ok && refused.stderr.contains("spec.colour"),
        "{}",
        refused.stderr
    );

    // get -w sees an update
    let mut child = k
        .cmd(&["get", "widgets", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(60), reader.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(first.contains("NAME"), "{first}");
    let initial = tokio::time::timeout(Duration::from_secs(60), reader.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        initial.split_whitespace().take(2).eq(["w1", "5"]),
        "{initial}"
    );
    k.ok(&[
        "patch",
        "widget",
        "w1",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"size":7}}"#,
    ])
    .await;
    let update = tokio::time::timeout(Duration::from_secs(60), reader.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        update.split_whitespace().take(2).eq(["w1", "7"]),
        "{update}"
    );
    child.kill().await.unwrap();

    // delete waits for a finalizer
    k.ok(&[
        "patch",
        "widget",
        "w1",
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    ])
    .await;
    assert!(
        k.ok(&["delete", "widget", "w1", "--wait=false"])
            .await
            .contains("deleted")
    );
    let ts = k
        .ok(&[
            "get",
            "widget",
            "w1",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ])
        .await;
    assert!(
        !ts.is_empty(),
        "deletionTimestamp set while the finalizer is pending"
    );
    k.ok(&[
        "patch",
        "widget",
        "w1",
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ])
    .await;
    let gone = k.run(&["get", "widget", "w1"]).await;
    assert!(
        !gone.ok && gone.stderr.contains("NotFound"),
        "{}",
        gone.stderr
    );
    c.shutdown().await;
}
