//! The HTTP API (actix-web): one dispatcher that reads the body within the size limit, parses
//! the path, applies fault injection, honours the Accept header, serves discovery / OpenAPI /
//! resources (CRUD, list, watch, patch, status, proxy; JSON, YAML and protobuf bodies; Table and
//! PartialObjectMetadata answers) and `/sim/faults`, answers errors as Status objects and records
//! every request.

mod body;
mod builtin_schemas;
pub mod context;
pub mod discovery;
pub mod jsonpath;
pub mod openapi;
mod openapi_v2_proto;
pub mod partial;
mod pod_exec;
mod pod_subresources;
pub mod protobuf;
pub mod proxy;
mod responses;
pub mod route;
mod sim_faults;
pub mod table;
pub mod watch;

pub use context::AppState;

use crate::error::ApiError;
use crate::objects::validation::check_field_manager;
use crate::objects::{DeleteOptions, ListOptions, Target, WriteOptions};
use crate::patch::PatchType;
use crate::registry::ResourceInfo;
use crate::requests::RequestRecord;
use crate::store::selectors::{FieldSelector, LabelSelector};
use crate::writes::{LeaseSnapshot, WriteRecord, is_mutating};
use actix_web::http::Method;
use actix_web::{HttpRequest, HttpResponse, web};
use body::parse_body;
use responses::{error_response, json_response, page_not_found, typed_response};
use route::{ResourcePath, Route};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;

fn header(req: &HttpRequest, name: &str) -> String {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

fn flag(q: &HashMap<String, String>, key: &str) -> bool {
    q.get(key).is_some_and(|v| v == "true" || v == "1")
}

/// What a request was, for the request record.
#[derive(Default)]
struct Described {
    verb: String,
    path: ResourcePath,
}

/// Entry point of every request.
pub async fn dispatch(
    req: HttpRequest,
    payload: web::Payload,
    app: web::Data<AppState>,
) -> HttpResponse {
    let app = app.get_ref().clone();
    // A WebSocket exec keeps its connection: its payload is the upgraded stream, not a body.
    let (body, mut upgraded) = if pod_exec::is_upgrade(&req) {
        (Ok(Default::default()), Some(payload))
    } else {
        (body::read(&req, payload).await, None)
    };
    let query: HashMap<String, String> =
        web::Query::<HashMap<String, String>>::from_query(req.query_string())
            .map(|q| q.into_inner())
            .unwrap_or_default();
    let route = route::parse(req.path(), &app.engine.registry);
    let user_agent = header(&req, "user-agent");
    let mut described = Described::default();
    if let Route::Resource(p) = &route {
        described.verb = verb_of(req.method(), p, &query);
        described.path = p.clone();
    } else {
        described.verb = "discovery".into();
    }
    if route == Route::SimFaults {
        // never faulted itself, so faults can always be turned off
        return match &body {
            Ok(body) => sim_faults::answer(&req, body, &app.faults),
            Err(e) => error_response(e),
        };
    }
    let latency = app.faults.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let attributes =
        crate::auth::attributes(&route, &described.verb, req.path(), req.method().as_str());
    let authorization = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    let impersonation = crate::auth::impersonation::Impersonation::from_headers(
        req.headers()
            .iter()
            .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?))),
    );
    let admitted = app.auth.admit(
        &app.engine.store,
        authorization,
        &impersonation,
        attributes.as_ref(),
    );
    let user = match &admitted {
        Ok(u) => u.name.clone(),
        Err((name, _)) => name.clone(),
    };
    let leases_before = (app.writes.enabled() && is_mutating(&described.verb))
        .then(|| LeaseSnapshot::read(&app.engine.store));
    let response = match (admitted, app.faults.rate_limited(&user_agent)) {
        (Err((_, e)), _) => error_response(&e),
        (Ok(_), Some(after)) => {
            let mut r = error_response(&ApiError::too_many_requests(
                "the request rate limit is exceeded; retry after the Retry-After delay",
            ));
            if let Ok(v) = actix_web::http::header::HeaderValue::from_str(&after.to_string()) {
                r.headers_mut()
                    .insert(actix_web::http::header::RETRY_AFTER, v);
            }
            r
        }
        (Ok(requester), None) => {
            match app
                .faults
                .error_for(&described.verb, &described.path.resource, &user_agent)
            {
                Some(code) => error_response(&ApiError::injected(code)),
                None => match (&body, &route, upgraded.take()) {
                    (Ok(_), Route::Resource(p), Some(payload)) if p.resource == "pods" => {
                        let namespace = p.namespace.clone().unwrap_or_default();
                        let name = p.name.clone().unwrap_or_default();
                        pod_exec::answer(&req, payload, &app, &namespace, &name, &query)
                            .await
                            .unwrap_or_else(|e| error_response(&e))
                    }
                    (Ok(body), _, _) => {
                        match review(&req, body, &app, &route, &requester, &query) {
                            Some(answer) => answer,
                            None => serve(&req, body, &app, route, &query, &user_agent).await,
                        }
                    }
                    (Err(e), _, _) => error_response(e),
                },
            }
        }
    };
    let status = response.status().as_u16();
    if let Some(before) = leases_before {
        app.writes.push(WriteRecord {
            verb: described.verb.clone(),
            group: described.path.group.clone(),
            resource: described.path.resource.clone(),
            subresource: described.path.subresource.clone().unwrap_or_default(),
            namespace: described.path.namespace.clone().unwrap_or_default(),
            name: described
                .path
                .name
                .clone()
                .or_else(|| {
                    (described.verb == "create")
                        .then(|| created_name(body.as_deref().unwrap_or_default()))
                })
                .unwrap_or_default(),
            user_agent: user_agent.clone(),
            status,
            before,
            after: LeaseSnapshot::read(&app.engine.store),
        });
    }
    app.log.push(RequestRecord {
        verb: described.verb,
        method: req.method().to_string(),
        path: req.path().to_string(),
        group: described.path.group,
        version: described.path.version,
        resource: described.path.resource,
        subresource: described.path.subresource.unwrap_or_default(),
        namespace: described.path.namespace.unwrap_or_default(),
        name: described.path.name.unwrap_or_default(),
        user_agent,
        user,
        status,
        time: chrono::Utc::now(),
    });
    response
}

/// The answer of a token or review request (None for any other request).
fn review(
    req: &HttpRequest,
    body: &[u8],
    app: &AppState,
    route: &Route,
    requester: &crate::auth::user::UserInfo,
    query: &HashMap<String, String>,
) -> Option<HttpResponse> {
    let Route::Resource(p) = route else {
        return None;
    };
    let manager = crate::objects::manager_name(
        query.get("fieldManager").map(String::as_str),
        &header(req, "user-agent"),
    );
    let answer = crate::auth::reviews::answer(
        &app.auth,
        &app.engine.store,
        requester,
        p,
        req.method(),
        body,
        &manager,
    )?;
    Some(match answer {
        Ok((code, object)) => json_response(code, &object),
        Err(e) => error_response(&e),
    })
}

/// The `metadata.name` of a create's JSON body (empty when absent or not JSON).
fn created_name(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_default()
}

fn verb_of(method: &Method, p: &ResourcePath, q: &HashMap<String, String>) -> String {
    let named = p.name.is_some();
    let v = match *method {
        Method::GET if named => "get",
        Method::GET if flag(q, "watch") => "watch",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "unknown",
    };
    v.to_string()
}

async fn serve(
    req: &HttpRequest,
    body: &[u8],
    app: &AppState,
    route: Route,
    q: &HashMap<String, String>,
    ua: &str,
) -> HttpResponse {
    let get_only = |doc: Option<Value>| {
        if req.method() != Method::GET {
            return error_response(&ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({})",
                req.path()
            )));
        }
        match doc {
            Some(d) => json_response(200, &d),
            None => page_not_found(),
        }
    };
    let accept = header(req, "accept");
    let openapi_v2 = route == Route::OpenApi("v2".to_string());
    if openapi_v2 && req.method() == Method::GET && openapi_v2_proto::wanted(&accept) {
        return match openapi_v2_proto::encode(&openapi::v2(&app.engine.registry)) {
            Ok(bytes) => HttpResponse::Ok()
                .content_type(openapi_v2_proto::MEDIA_TYPE)
                .body(bytes),
            Err(e) => error_response(&e),
        };
    }
    let proxied = matches!(&route, Route::Resource(p) if p.subresource.as_deref() == Some("proxy"));
    if !proxied && route != Route::Health && !protobuf::accepts_json(&accept) {
        return error_response(&ApiError::not_acceptable());
    }
    match route {
        Route::Version => get_only(Some(discovery::version())),
        Route::Health => HttpResponse::Ok().content_type("text/plain").body("ok"),
        Route::CoreVersions | Route::Groups
            if req.method() == Method::GET
                && discovery::wants_aggregated(&header(req, "accept")) =>
        {
            let doc = discovery::aggregated(&app.engine.registry, route == Route::CoreVersions);
            HttpResponse::Ok()
                .content_type(discovery::AGGREGATED_CONTENT_TYPE)
                .body(serde_json::to_vec(&doc).unwrap_or_default())
        }
        Route::CoreVersions => get_only(Some(discovery::core_versions(&app.address))),
        Route::Groups => get_only(Some(discovery::groups(&app.engine.registry))),
        Route::Group(g) => get_only(discovery::group(&app.engine.registry, &g)),
        Route::GroupVersion(g, v) => {
            get_only(discovery::resource_list(&app.engine.registry, &g, &v))
        }
        Route::OpenApi(p) if p == "v3" => get_only(Some(openapi::index(
            &app.engine.registry,
            app.engine.store.resource_version(),
        ))),
        Route::OpenApi(p) if p.starts_with("v3/") => {
            get_only(openapi::group_version(&app.engine.registry, &p[3..]))
        }
        Route::OpenApi(p) if p == "v2" => get_only(Some(openapi::v2(&app.engine.registry))),
        Route::OpenApi(_) | Route::SimFaults => {
            error_response(&ApiError::not_found_path(req.path()))
        }
        Route::Unknown => page_not_found(),
        Route::Resource(p) => match serve_resource(req, body, app, p, q, ua).await {
            Ok(r) => r,
            Err(e) => error_response(&e),
        },
    }
}

fn list_options(
    q: &HashMap<String, String>,
    info: &ResourceInfo,
    version: &str,
) -> Result<ListOptions, ApiError> {
    let fields = FieldSelector::parse(
        q.get("fieldSelector")
            .map(String::as_str)
            .unwrap_or_default(),
    )?;
    if let Some(label) = fields
        .labels()
        .find(|label| !info.supports_field_label(version, label))
    {
        return Err(ApiError::bad_request(format!(
            "field label not supported: {label}"
        )));
    }
    Ok(ListOptions {
        labels: LabelSelector::parse(
            q.get("labelSelector")
                .map(String::as_str)
                .unwrap_or_default(),
        )?,
        fields,
        limit: q.get("limit").and_then(|l| l.parse().ok()),
        continue_token: q.get("continue").cloned(),
    })
}

/// The options of a write; `options_kind` (CreateOptions, UpdateOptions, PatchOptions) names
/// them in the refusal of an invalid field manager.
fn write_options(
    q: &HashMap<String, String>,
    ua: &str,
    options_kind: &str,
) -> Result<WriteOptions, ApiError> {
    check_field_manager(q.get("fieldManager").map(String::as_str), options_kind)?;
    Ok(WriteOptions {
        field_manager: q.get("fieldManager").cloned(),
        force: flag(q, "force"),
        dry_run: q.get("dryRun").is_some_and(|d| d == "All"),
        user_agent: ua.to_string(),
        field_validation: q.get("fieldValidation").cloned(),
    })
}

/// A create or update body: JSON, YAML, or (for built-in kinds) Kubernetes protobuf.
fn parse_object(req: &HttpRequest, body: &[u8], target: &Target) -> Result<Value, ApiError> {
    let ct = header(req, "content-type").to_ascii_lowercase();
    if ct.starts_with(protobuf::MEDIA_TYPE) {
        if body.is_empty() {
            return Err(ApiError::bad_request("the request body is empty"));
        }
        if target.info.crd.is_some() {
            return Err(ApiError::unsupported_media_type_for(
                protobuf::MEDIA_TYPE,
                "custom resources have no protobuf form",
            ));
        }
        return protobuf::decode(body);
    }
    parse_body(req, body)
}

fn delete_options(
    req: &HttpRequest,
    body: &[u8],
    q: &HashMap<String, String>,
) -> Result<DeleteOptions, ApiError> {
    let mut opts = DeleteOptions {
        propagation: q.get("propagationPolicy").cloned(),
        dry_run: q.get("dryRun").is_some_and(|d| d == "All"),
        grace_period: match q.get("gracePeriodSeconds") {
            Some(text) => Some(text.parse::<i64>().map_err(|_| {
                ApiError::bad_request(format!("invalid gracePeriodSeconds {text:?}"))
            })?),
            None => None,
        },
        ..DeleteOptions::default()
    };
    if let Some(orphan) = q.get("orphanDependents")
        && orphan == "true"
    {
        opts.propagation = Some("Orphan".into());
    }
    if !body.is_empty() {
        let b = parse_body(req, body)?;
        if let Some(p) = b.get("propagationPolicy").and_then(Value::as_str) {
            opts.propagation = Some(p.to_string());
        }
        if b.get("orphanDependents").and_then(Value::as_bool) == Some(true) {
            opts.propagation = Some("Orphan".into());
        }
        if let Some(grace) = b.get("gracePeriodSeconds").and_then(Value::as_i64) {
            opts.grace_period = Some(grace);
        }
        opts.precondition_uid = b
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string);
        opts.precondition_rv = b
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string);
        if b.get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|d| d.iter().any(|x| x == "All"))
        {
            opts.dry_run = true;
        }
    }
    match opts.propagation.as_deref() {
        None | Some("Background" | "Foreground" | "Orphan") => Ok(opts),
        Some(other) => Err(ApiError::bad_request(format!(
            "invalid propagationPolicy {other:?}"
        ))),
    }
}

async fn serve_resource(
    req: &HttpRequest,
    body: &[u8],
    app: &AppState,
    p: ResourcePath,
    q: &HashMap<String, String>,
    ua: &str,
) -> Result<HttpResponse, ApiError> {
    let engine = &app.engine;
    if !engine.registry.serves_group_version(&p.group, &p.version) {
        return Ok(page_not_found());
    }
    let info = engine
        .registry
        .find(&p.group, &p.version, &p.resource)
        .ok_or_else(|| ApiError::not_found_path(req.path()))?;
    if p.namespace.is_some() && !info.namespaced {
        return Err(ApiError::not_found_path(req.path()));
    }
    let sub = p.subresource.clone().unwrap_or_default();
    let served_sub = match sub.as_str() {
        "" => true,
        "status" => info.has_status,
        "proxy" => info.has_proxy,
        other => info.extra_subresources().iter().any(|s| s.name == other),
    };
    if !served_sub {
        return Err(ApiError::not_found_path(req.path()));
    }
    let namespace = p.namespace.clone().unwrap_or_default();
    if info.namespaced && p.name.is_some() && namespace.is_empty() {
        return Err(ApiError::not_found_path(req.path()));
    }
    if sub == "proxy" {
        let segment = p.name.clone().unwrap_or_default();
        return proxy::answer(req, body, app, &namespace, &segment, &p.rest).await;
    }
    let target = Target {
        info: info.clone(),
        version: p.version.clone(),
        namespace,
        name: p.name.clone().unwrap_or_default(),
        subresource: sub,
    };
    if !matches!(target.subresource.as_str(), "" | "status") {
        return pod_subresources::answer(req, body, app, &target, q, ua).await;
    }
    let accept = header(req, "accept");
    let as_table = table::wants_table(&accept);
    let metadata_only = !as_table && partial::wants_metadata(&accept);
    let include = table::IncludeObject::parse(q.get("includeObject").map(String::as_str));
    let method = req.method().clone();
    let named = p.name.is_some();
    match method {
        Method::GET if named => {
            let obj = engine.get(&target)?;
            if as_table && target.subresource.is_empty() {
                let rv = obj
                    .pointer("/metadata/resourceVersion")
                    .cloned()
                    .unwrap_or(json!(""));
                return Ok(json_response(
                    200,
                    &table::table(
                        &info,
                        &p.version,
                        &[obj],
                        include,
                        json!({"resourceVersion": rv}),
                    ),
                ));
            }
            if metadata_only && target.subresource.is_empty() {
                return Ok(typed_response(
                    partial::content_type(false),
                    &partial::object(&obj),
                ));
            }
            Ok(json_response(200, &obj))
        }
        Method::GET if flag(q, "watch") => {
            let rv = q.get("resourceVersion").map(String::as_str).unwrap_or("");
            let since = match rv {
                "" | "0" => None,
                x => Some(x.parse::<u64>().map_err(|_| {
                    ApiError::bad_request(format!("invalid resourceVersion {x:?}"))
                })?),
            };
            let timeout = q
                .get("timeoutSeconds")
                .and_then(|t| t.parse::<u64>().ok())
                .filter(|t| *t > 0)
                .unwrap_or(1800);
            let lo = list_options(q, &info, &p.version)?;
            let params = watch::WatchParams {
                since,
                send_initial_events: flag(q, "sendInitialEvents"),
                bookmarks: flag(q, "allowWatchBookmarks"),
                timeout: Duration::from_secs(timeout),
                labels: lo.labels,
                fields: lo.fields,
                table: if as_table { Some(include) } else { None },
                metadata_only,
            };
            let content_type = if as_table {
                "application/json;as=Table;v=v1;g=meta.k8s.io"
            } else if metadata_only {
                partial::content_type(false)
            } else {
                "application/json"
            };
            Ok(HttpResponse::Ok()
                .content_type(content_type)
                .insert_header(("Transfer-Encoding", "chunked"))
                .streaming(watch::stream(app.clone(), target, params)))
        }
        Method::GET => {
            let lo = list_options(q, &info, &p.version)?;
            let (mut items, rv, cont, remaining) = engine.list(&target, &lo)?;
            let mut meta = json!({"resourceVersion": rv.to_string()});
            if let Some(c) = cont {
                meta["continue"] = json!(c);
                meta["remainingItemCount"] = json!(remaining);
            } else if info.crd.is_some() {
                // a custom resource list is unstructured: its continue token is always there
                meta["continue"] = json!("");
            }
            if info.crd.is_none() {
                // a built-in list's items are typed structs without apiVersion and kind
                strip_item_types(&mut items);
            }
            if as_table {
                return Ok(json_response(
                    200,
                    &table::table(&info, &p.version, &items, include, meta),
                ));
            }
            if metadata_only {
                return Ok(typed_response(
                    partial::content_type(true),
                    &partial::list(&items, meta),
                ));
            }
            // the items move into the answer (`json!` would copy each of them)
            let mut list = json!({"kind": info.list_kind, "apiVersion": info.api_version(&p.version), "metadata": meta});
            list["items"] = Value::Array(items);
            Ok(json_response(200, &list))
        }
        Method::POST if !named => {
            let obj = parse_object(req, body, &target)?;
            let created = engine.create(&target, obj, &write_options(q, ua, "CreateOptions")?)?;
            Ok(json_response(201, &created))
        }
        Method::PUT if named => {
            let obj = parse_object(req, body, &target)?;
            let updated = engine.update(&target, obj, &write_options(q, ua, "UpdateOptions")?)?;
            Ok(json_response(200, &updated))
        }
        Method::PATCH if named => {
            let ptype = PatchType::from_content_type(&header(req, "content-type"))?;
            if body.is_empty() {
                return Err(ApiError::bad_request("the patch body is empty"));
            }
            let opts = write_options(q, ua, "PatchOptions")?;
            let existed = ptype == PatchType::Apply && engine.get(&target).is_ok();
            let patched = engine.patch(&target, ptype, body, &opts)?;
            let code = if ptype == PatchType::Apply && !existed {
                201
            } else {
                200
            };
            Ok(json_response(code, &patched))
        }
        Method::DELETE if named => {
            if !target.subresource.is_empty() {
                return Err(ApiError::method_not_allowed(
                    "a subresource cannot be deleted",
                ));
            }
            let opts = delete_options(req, body, q)?;
            let deleted = engine.delete(&target, &opts)?;
            if deleted.gone && !info.returns_deleted_object() {
                return Ok(json_response(200, &deleted_status(&info, &deleted.object)));
            }
            Ok(json_response(
                if deleted.gone || deleted.graceful {
                    200
                } else {
                    202
                },
                &deleted.object,
            ))
        }
        Method::DELETE => {
            let opts = delete_options(req, body, q)?;
            let lo = list_options(q, &info, &p.version)?;
            let mut items = engine.delete_collection(&target, &lo, &opts)?;
            if info.crd.is_none() {
                strip_item_types(&mut items);
            }
            Ok(json_response(
                200,
                &json!({"kind": info.list_kind, "apiVersion": info.api_version(&p.version), "metadata": {"resourceVersion": engine.store.resource_version().to_string()}, "items": items}),
            ))
        }
        _ => Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({} {})",
            req.method(),
            req.path()
        ))),
    }
}

/// Removes `apiVersion` and `kind` from each item, as a built-in kind's typed list is encoded.
fn strip_item_types(items: &mut [Value]) {
    for item in items {
        if let Some(m) = item.as_object_mut() {
            m.remove("apiVersion");
            m.remove("kind");
        }
    }
}

/// The Status a real server answers when an object of a kind that does not return deleted
/// objects is gone at once (a ConfigMap, a Deployment): Success, naming what went.
fn deleted_status(info: &ResourceInfo, object: &Value) -> Value {
    let mut details = json!({
        "name": object.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
        "kind": info.resource,
        "uid": object.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
    });
    if !info.group.is_empty() {
        details["group"] = json!(info.group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}
