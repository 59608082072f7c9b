// The console page: reads the API every two seconds and renders it; actions POST to the API
// with the token from the login form. The trace tabs search the execution trace on demand
// (a search, a page, a sort), not every two seconds. No framework: plain DOM calls.
"use strict";

const state = {
  token: sessionStorage.getItem("shardcron-token") || "",
  readOnly: false,
  job: null,
  trace: false,
  tab: "cluster",
};
const $ = (selector) => document.querySelector(selector);

function element(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child instanceof Node ? child : String(child ?? ""));
  return node;
}

function badge(status) {
  return element("span", { class: "s-" + status }, status);
}

// Calls the API; resolves to the model, rejects with the wrapper's errorMsg.
async function api(method, path, body, contentType) {
  const headers = {};
  if (state.token) headers["Access-Token"] = state.token;
  if (body !== undefined) headers["Content-Type"] = contentType || "application/json";
  const response = await fetch("api" + path, { method, headers, body });
  let answer;
  try {
    answer = await response.json();
  } catch (e) {
    throw new Error("HTTP " + response.status);
  }
  if (typeof answer === "number") return answer;
  if (!answer.success) throw new Error(answer.errorMsg || "HTTP " + response.status);
  return answer.model;
}

function notice(text, kind) {
  const box = $("#notice");
  box.textContent = text;
  box.className = "notice" + (kind ? " " + kind : "");
  box.hidden = !text;
}

// Runs an action, then refreshes; failures show in the notice bar.
async function act(method, path, done) {
  try {
    await api(method, path);
    notice("");
    if (done) done();
  } catch (e) {
    notice(e.message);
    forgetStaleToken(e);
  }
  refresh();
}

// A token from an earlier run of the console no longer works: ask for the new one.
function forgetStaleToken(error) {
  if (/access token|log in/.test(error.message)) {
    state.token = "";
    sessionStorage.removeItem("shardcron-token");
    renderLogin();
  }
}

function canWrite() {
  return !state.readOnly && state.token !== "";
}

function actionButton(label, method, path, extra) {
  const button = element("button", Object.assign({ type: "button" }, extra || {}), label);
  button.disabled = !canWrite();
  button.addEventListener("click", (event) => {
    event.stopPropagation();
    act(method, path);
  });
  return button;
}

const enc = encodeURIComponent;

function renderJobs(jobs) {
  const body = $("#jobs tbody");
  body.replaceChildren(...jobs.map((job) => {
    const row = element("tr", { "data-job": job.jobName, onclick: () => select(job.jobName) },
      element("td", { class: "mono" }, job.jobName),
      element("td", { class: "status" }, badge(job.status)),
      element("td", { class: "mono" }, job.cron || "(one-off)"),
      element("td", {}, job.shardingTotalCount),
      element("td", {}, job.instanceCount),
      element("td", {}, job.problem ? "config unusable: " + job.problem : job.description),
      element("td", {}, actionButton("Trigger", "POST", "/jobs/" + enc(job.jobName) + "/trigger")));
    if (job.jobName === state.job) row.classList.add("selected");
    return row;
  }));
  $("#no-jobs").hidden = jobs.length > 0;
}

function renderServers(servers) {
  $("#servers tbody").replaceChildren(...servers.map((server) => {
    const all = server.jobsNum > 0 && server.disabledJobsNum === server.jobsNum;
    const path = "/servers/" + enc(server.serverIp) + (all ? "/enable" : "/disable");
    return element("tr", { "data-server": server.serverIp },
      element("td", { class: "mono" }, server.serverIp),
      element("td", {}, server.instancesNum),
      element("td", {}, server.jobNames.join(", ")),
      element("td", {}, server.disabledJobsNum),
      element("td", {}, actionButton(all ? "Enable" : "Disable", "POST", path)));
  }));
  $("#no-servers").hidden = servers.length > 0;
}

function renderJob(detail) {
  const job = detail.brief.jobName;
  $("#job-name").textContent = job;
  const status = $("#job-status");
  status.textContent = detail.brief.status;
  status.className = "badge s-" + detail.brief.status;
  $("#items tbody").replaceChildren(...detail.sharding.map((item) => {
    const disabled = item.status === "DISABLED";
    const path = "/jobs/" + enc(job) + "/sharding/" + item.item + (disabled ? "/enable" : "/disable");
    return element("tr", { "data-item": item.item, class: disabled ? "off" : "" },
      element("td", {}, item.item),
      element("td", { class: "status" }, badge(item.status)),
      element("td", { class: "mono" }, item.instanceId || "-"),
      element("td", { class: "mono" }, item.failover ? item.failoverInstanceId : "-"),
      element("td", {}, actionButton(disabled ? "Enable" : "Disable", "POST", path,
        { "data-action": disabled ? "enable-item" : "disable-item" })));
  }));
  $("#job-servers tbody").replaceChildren(...detail.servers.map((server) => {
    const disabled = server.status === "DISABLED";
    const base = "/servers/" + enc(server.serverIp) + "/jobs/" + enc(job);
    return element("tr", { "data-server": server.serverIp },
      element("td", { class: "mono" }, server.serverIp),
      element("td", { class: "status" }, badge(server.status)),
      element("td", { class: "mono" }, server.instances.join(", ") || "-"),
      element("td", {},
        actionButton(disabled ? "Enable" : "Disable", "POST", base + (disabled ? "/enable" : "/disable")),
        " ",
        actionButton("Shut down", "POST", base + "/shutdown", { class: "danger" })));
  }));
  for (const button of document.querySelectorAll("#job-actions button[data-action]")) {
    button.disabled = !canWrite();
  }
  $("#job-trace").hidden = !state.trace;
  $("#save-config").disabled = !canWrite();
}

async function loadConfig() {
  if (!state.job) return;
  try {
    const detail = await api("GET", "/jobs/" + enc(state.job));
    $("#config").value = detail.yaml;
    result("#config-result", "");
  } catch (e) {
    result("#config-result", e.message, false);
  }
}

function result(selector, text, ok) {
  const span = $(selector);
  span.textContent = text;
  span.className = "result" + (text ? (ok ? " ok" : " bad") : "");
}

function select(job) {
  state.job = job;
  $("#job").hidden = false;
  loadConfig();
  refresh();
}

let refreshing = false;
async function refresh() {
  if (refreshing) return;
  refreshing = true;
  try {
    const [jobs, servers] = await Promise.all([
      api("GET", "/jobs/getAllJobsBriefInfo"),
      api("GET", "/servers/getAllServersBriefInfo"),
    ]);
    renderJobs(jobs);
    renderServers(servers);
    if (state.job && jobs.some((j) => j.jobName === state.job)) {
      renderJob(await api("GET", "/jobs/" + enc(state.job)));
    } else if (state.job) {
      state.job = null;
      $("#job").hidden = true;
    }
    $("#refreshed").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    notice("cannot read the registry: " + e.message);
  } finally {
    refreshing = false;
  }
}

function renderLogin() {
  $("#login-form").hidden = state.readOnly || state.token !== "";
  const who = $("#who");
  who.hidden = !(state.readOnly || state.token !== "");
  who.textContent = state.readOnly ? "read-only console" : "logged in";
}

async function login(event) {
  event.preventDefault();
  try {
    const model = await api("POST", "/login", JSON.stringify({ username: "admin", password: $("#token").value }));
    state.token = model.accessToken;
    sessionStorage.setItem("shardcron-token", state.token);
    notice("");
  } catch (e) {
    notice("login: " + e.message);
  }
  renderLogin();
  refresh();
}

async function saveConfig() {
  try {
    const update = await api("PUT", "/jobs/" + enc(state.job) + "/yaml", $("#config").value, "application/yaml");
    result("#config-result", update.replacedOnRestart
      ? "saved; note: the instances publish with overwrite on and replace it when they restart"
      : "saved", true);
  } catch (e) {
    result("#config-result", e.message, false);
  }
  refresh();
}

async function addJob() {
  const name = $("#new-name").value.trim();
  if (!name) return result("#add-result", "give the job a name", false);
  try {
    await api("POST", "/jobs/" + enc(name) + "/yaml", $("#new-config").value, "application/yaml");
    result("#add-result", "added " + name, true);
    select(name);
  } catch (e) {
    result("#add-result", e.message, false);
  }
}

// ---------------------------------------------------------------- the trace tabs

// The two searches: where they POST, their form, and how a row renders.
const searches = {
  trace: {
    path: "/event-trace/execution",
    page: 1, size: 20, sortBy: "", orderType: "",
    row: (r) => element("tr", { "data-id": r.id, class: r.success ? "" : "failed" },
      element("td", { class: "mono job" }, r.jobName),
      element("td", { class: "item" }, r.shardingItem),
      element("td", { class: "mono" }, r.ip),
      element("td", { class: "mono" }, r.hostname),
      element("td", {}, r.source),
      element("td", { class: "status result" },
        r.completeTime == null ? badge("RUNNING") : badge(r.success ? "SUCCEEDED" : "FAILED")),
      element("td", { class: "time" }, when(r.startTime)),
      element("td", { class: "time" }, when(r.completeTime)),
      element("td", { class: "cause" }, r.failureCause || "")),
  },
  status: {
    path: "/event-trace/status",
    page: 1, size: 20, sortBy: "", orderType: "",
    row: (r) => element("tr", { "data-id": r.id },
      element("td", { class: "mono job" }, r.jobName),
      element("td", { class: "mono" }, r.shardingItem),
      element("td", { class: "mono" }, r.slaveId),
      element("td", {}, r.executionType),
      element("td", { class: "status state" }, badge(r.state)),
      element("td", { class: "time" }, when(r.creationTime)),
      element("td", { class: "cause" }, r.message || ""),
      element("td", { class: "mono small" }, r.taskId)),
  },
};

// Epoch milliseconds as local "YYYY-MM-DD HH:MM:SS".
function when(ms) {
  if (ms == null) return "-";
  const d = new Date(ms);
  const two = (n) => String(n).padStart(2, "0");
  return d.getFullYear() + "-" + two(d.getMonth() + 1) + "-" + two(d.getDate()) + " " +
    two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
}

// The form's filters as the search body: empty fields left out, local times as epoch ms.
function filters(form) {
  const body = {};
  for (const field of form.elements) {
    if (!field.name || field.value === "") continue;
    if (field.type === "datetime-local") body[field.name] = new Date(field.value).getTime();
    else if (field.name === "isSuccess") body.isSuccess = field.value === "true";
    else body[field.name] = field.value.trim();
  }
  return body;
}

async function search(kind) {
  const s = searches[kind];
  const body = filters($("#" + kind + "-form"));
  body.pageSize = s.size;
  body.pageNumber = s.page;
  if (s.sortBy) Object.assign(body, { sortBy: s.sortBy, orderType: s.orderType });
  // Only the latest search renders: an earlier one answering late must not overwrite it.
  const asked = (s.asked = (s.asked || 0) + 1);
  try {
    const model = await api("POST", s.path, JSON.stringify(body));
    if (asked !== s.asked) return;
    $("#" + kind + " tbody").replaceChildren(...model.rows.map(s.row));
    $("#" + kind + "-empty").hidden = model.rows.length > 0;
    $("#" + kind + "-count").textContent = model.total + (model.total === 1 ? " row" : " rows");
    renderPager(kind, model.total);
    notice("");
  } catch (e) {
    if (asked === s.asked) notice("search: " + e.message);
  }
}

function renderPager(kind, total) {
  const s = searches[kind];
  const pages = Math.max(1, Math.ceil(total / s.size));
  const go = (page) => () => { s.page = page; search(kind); };
  const previous = element("button", { type: "button", class: "plain", "data-page": "previous", onclick: go(s.page - 1) }, "‹ Previous");
  const next = element("button", { type: "button", class: "plain", "data-page": "next", onclick: go(s.page + 1) }, "Next ›");
  previous.disabled = s.page <= 1;
  next.disabled = s.page >= pages;
  const size = element("select", { "aria-label": "rows per page" },
    ...[10, 20, 50, 100].map((n) => {
      const option = element("option", { value: n }, n + " per page");
      if (n === s.size) option.selected = true;
      return option;
    }));
  size.addEventListener("change", () => { s.size = Number(size.value); s.page = 1; search(kind); });
  $("#" + kind + "-pager").replaceChildren(previous,
    element("span", { class: "muted" }, "page " + s.page + " of " + pages), next, size);
}

// Clicking a column header sorts by it; a second click turns the order round.
function sortable(kind) {
  const s = searches[kind];
  for (const th of document.querySelectorAll("#" + kind + " th[data-sort]")) {
    th.addEventListener("click", () => {
      s.orderType = s.sortBy === th.dataset.sort && s.orderType === "DESC" ? "ASC" : "DESC";
      s.sortBy = th.dataset.sort;
      for (const other of document.querySelectorAll("#" + kind + " th")) other.className = "";
      th.className = s.orderType === "ASC" ? "asc" : "desc";
      s.page = 1;
      search(kind);
    });
  }
}

// Fills a datalist from an autocomplete endpoint as the user types.
function autocomplete(input, list, path) {
  let asked = null;
  const fill = async () => {
    const prefix = input.value.trim();
    if (prefix === asked) return;
    asked = prefix;
    try {
      const names = await api("GET", path + (prefix ? "/" + enc(prefix) : ""));
      $(list).replaceChildren(...names.map((name) => element("option", { value: name })));
    } catch (e) {
      // Suggestions are a convenience: the search itself reports what is wrong.
    }
  };
  input.addEventListener("focus", fill);
  input.addEventListener("input", fill);
}

function showTab(tab) {
  state.tab = tab;
  for (const button of document.querySelectorAll("#tabs button")) {
    button.classList.toggle("active", button.dataset.tab === tab);
  }
  for (const name of ["cluster", "trace", "status"]) $("#tab-" + name).hidden = name !== tab;
  if (tab !== "cluster" && state.trace) search(tab);
}

function setUpTrace() {
  for (const note of document.querySelectorAll(".no-trace")) note.hidden = state.trace;
  for (const kind of ["trace", "status"]) {
    const form = $("#" + kind + "-form");
    form.hidden = !state.trace;
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      searches[kind].page = 1;
      search(kind);
    });
    form.addEventListener("reset", () => setTimeout(() => { searches[kind].page = 1; search(kind); }));
    sortable(kind);
  }
  autocomplete($("#trace-form [name=jobName]"), "#trace-jobs", "/event-trace/execution/jobNames");
  autocomplete($("#trace-form [name=ip]"), "#trace-ips", "/event-trace/execution/ip");
  autocomplete($("#status-form [name=jobName]"), "#status-jobs", "/event-trace/status/jobNames");
  for (const button of document.querySelectorAll("#tabs button")) {
    button.addEventListener("click", () => showTab(button.dataset.tab));
  }
  // From a job's card to its trace.
  $("#job-trace").addEventListener("click", () => {
    $("#trace-form [name=jobName]").value = state.job;
    searches.trace.page = 1;
    showTab("trace");
  });
}

async function start() {
  const info = await api("GET", "/console");
  state.readOnly = info.readOnly;
  state.trace = info.trace;
  setUpTrace();
  $("#where").textContent = info.registry;
  if (state.readOnly) state.token = "";
  renderLogin();
  $("#login-form").addEventListener("submit", login);
  $("#save-config").addEventListener("click", saveConfig);
  $("#reload-config").addEventListener("click", loadConfig);
  $("#add-job").addEventListener("click", addJob);
  $("#add-job").disabled = state.readOnly;
  for (const button of document.querySelectorAll("#job-actions button[data-action]")) {
    button.addEventListener("click", () => {
      const verb = button.dataset.action;
      act("POST", "/jobs/" + enc(state.job) + "/" + verb);
    });
  }
  refresh();
  setInterval(refresh, 2000);
}

start().catch((e) => notice("cannot start: " + e.message));
