# frozen_string_literal: true

module SolidJobs
  class Web
    # The HTML document around a page: navigation, the inline style sheet
    # and the live-refresh script, both carrying the response's CSP nonce.
    class Layout
      STYLE = <<~CSS
        :root { --fg:#1d2330; --muted:#5d6677; --line:#d8dde6; --bg:#f6f7f9; --card:#fff;
                --s1:#2f6fdb; --s2:#d2442f; --s3:#2e9a5b; --s4:#a05fd0; --warn:#b7791f; }
        * { box-sizing: border-box; }
        body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; color:var(--fg); background:var(--bg); }
        header { display:flex; flex-wrap:wrap; align-items:center; gap:4px 18px; padding:10px 20px; background:#1d2330; color:#fff; }
        header .brand { font-weight:700; font-size:16px; }
        header nav a { color:#c9d3e6; text-decoration:none; padding:4px 8px; border-radius:4px; }
        header nav a[aria-current=page] { background:#3a4458; color:#fff; }
        header .meta { margin-left:auto; color:#c9d3e6; font-size:12px; }
        #live { font-size:12px; padding:2px 8px; border-radius:10px; background:#3a4458; color:#fff; border:0; cursor:pointer; }
        #live.stale { background:var(--warn); }
        main { padding:16px 20px 32px; max-width:1400px; }
        h1 { font-size:20px; margin:4px 0 12px; }
        h2 { font-size:16px; margin:22px 0 8px; }
        section { margin-bottom:18px; }
        .tiles { display:flex; flex-wrap:wrap; gap:10px; }
        .tile { background:var(--card); border:1px solid var(--line); border-radius:6px; padding:8px 14px; min-width:130px; }
        .tile .label { color:var(--muted); font-size:12px; }
        .tile .value { font-size:20px; font-weight:600; }
        .charts { display:grid; grid-template-columns:repeat(auto-fit,minmax(460px,1fr)); gap:12px; }
        figure.chart { margin:0; background:var(--card); border:1px solid var(--line); border-radius:6px; padding:8px; }
        figure.chart figcaption { display:flex; flex-wrap:wrap; gap:10px; font-size:12px; margin-top:4px; }
        svg.chart { width:100%; height:auto; display:block; }
        svg.chart.bars, svg.chart.timeline { max-width:760px; }
        svg.chart .plot { fill:#fbfcfd; stroke:var(--line); }
        svg.chart .grid { stroke:#e7eaf0; }
        svg.chart .axis { fill:var(--muted); font-size:11px; }
        svg.chart .empty { fill:var(--muted); font-size:13px; }
        svg.chart .gap { fill:#eceef2; }
        svg.chart .line { fill:none; stroke-width:2; }
        svg.chart .line.s1 { stroke:var(--s1); } svg.chart .line.s2 { stroke:var(--s2); }
        svg.chart .line.s3 { stroke:var(--s3); } svg.chart .line.s4 { stroke:var(--s4); }
        svg.chart .bar.s1, svg.chart .dot.s1 { fill:var(--s1); } svg.chart .bar.s2, svg.chart .dot.s2 { fill:var(--s2); }
        svg.chart .bar.s3, svg.chart .dot.s3 { fill:var(--s3); } svg.chart .bar.s4, svg.chart .dot.s4 { fill:var(--s4); }
        svg.chart .unavailable { fill:var(--warn); }
        svg.timeline .span { fill:var(--s1); } svg.timeline .wait { fill:#b9c7e3; } svg.timeline .fail { fill:var(--s2); }
        .key::before { content:""; display:inline-block; width:10px; height:10px; margin-right:4px; border-radius:2px; background:var(--s1); }
        .key.s2::before { background:var(--s2); } .key.s3::before { background:var(--s3); } .key.s4::before { background:var(--s4); }
        .key.gap::before { background:#eceef2; border:1px solid var(--line); } .key.wait::before { background:#b9c7e3; }
        .state.acknowledged, .state.connected { background:#dff3e7; }
        .legend { display:flex; gap:10px; color:var(--muted); }
        table { border-collapse:collapse; background:var(--card); border:1px solid var(--line); width:100%; }
        th, td { text-align:left; padding:5px 9px; border-bottom:1px solid var(--line); vertical-align:top; }
        th { background:#eef1f5; font-weight:600; font-size:12px; color:var(--muted); }
        td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; }
        code, .mono { font-family:ui-monospace,SFMono-Regular,Menlo,monospace; font-size:12px; }
        .unavailable { color:var(--warn); font-style:italic; }
        .stale { color:var(--warn); }
        .ok { color:var(--s3); }
        .bad { color:var(--s2); font-weight:600; }
        .muted { color:var(--muted); }
        .state { display:inline-block; padding:0 6px; border-radius:3px; background:#eef1f5; font-size:12px; }
        .state.running, .state.completed, .state.connected { background:#dff3e7; }
        .state.failed, .state.dead, .state.disconnected, .state.stopped { background:#fbe1dc; }
        .state.retry_scheduled, .state.stopping { background:#fbefd5; }
        dl.facts { display:grid; grid-template-columns:max-content 1fr; gap:2px 14px; margin:0; }
        dl.facts dt { color:var(--muted); }
        dl.facts dd { margin:0; }
        .note { color:var(--muted); font-size:12px; }
        footer { padding:0 20px 20px; color:var(--muted); font-size:12px; }
        header form.search { display:flex; gap:4px; }
        header form.search input { width:180px; padding:3px 8px; border-radius:4px; border:1px solid #3a4458; background:#2a3242; color:#fff; }
        header form.search input::placeholder { color:#9aa6bd; }
        header form.search button, form.filters button { padding:3px 10px; border-radius:4px; border:1px solid var(--line); background:#eef1f5; cursor:pointer; }
        form.filters { display:flex; flex-wrap:wrap; align-items:center; gap:8px 14px; margin:0 0 10px; }
        form.filters label { color:var(--muted); font-size:12px; }
        form.filters input { padding:3px 6px; border:1px solid var(--line); border-radius:4px; font:inherit; color:var(--fg); }
        .pager a { margin-right:12px; }
      CSS

      # Re-fetches this page every few seconds and swaps <main>: the server
      # renders (and escapes) everything, the script only moves parsed
      # nodes, and it runs only because its nonce matches the CSP. When a
      # refresh fails, the page says so and how old what it shows is.
      SCRIPT = <<~JS
        (function () {
          var every = Number(document.body.getAttribute("data-refresh")) * 1000;
          var live = document.getElementById("live");
          if (!every || !live || !window.fetch || !window.DOMParser) return;
          var paused = false, last = new Date(), timer = null;
          function hhmmss(d) { return d.toISOString().substring(11, 19) + " UTC"; }
          function show(text, stale) { live.textContent = text; live.className = stale ? "stale" : ""; }
          function schedule() { clearTimeout(timer); timer = setTimeout(tick, every); }
          function tick() {
            if (paused || document.hidden) { schedule(); return; }
            fetch(window.location.href, { credentials: "same-origin", cache: "no-store", headers: { "Accept": "text/html" } })
              .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.text(); })
              .then(function (text) {
                var next = new DOMParser().parseFromString(text, "text/html").querySelector("main");
                var main = document.querySelector("main");
                if (!next || !main) throw new Error("no content");
                main.replaceWith(document.adoptNode(next));
                last = new Date();
                show("live \\u00b7 updated " + hhmmss(last), false);
              })
              .catch(function (e) { show("refresh failed (" + e.message + ") \\u00b7 showing data from " + hhmmss(last), true); })
              .then(schedule);
          }
          live.addEventListener("click", function () {
            paused = !paused;
            show(paused ? "paused \\u00b7 click to resume" : "live", false);
            if (!paused) tick();
          });
          show("live \\u00b7 updated " + hhmmss(last), false);
          schedule();
        })();
      JS

      def initialize(env, page, nonce:, refresh:)
        @base = env["SCRIPT_NAME"].to_s.chomp("/")
        @page = page
        @nonce = nonce
        @refresh = refresh
      end

      def to_html
        Html.trusted("<!DOCTYPE html>\n") + Html.tag(:html, [head, body], lang: "en")
      end

      private

      def head
        Html.tag(:head, [
          Html.tag(:meta, nil, charset: "utf-8"),
          Html.tag(:meta, nil, name: "viewport", content: "width=device-width, initial-scale=1"),
          Html.tag(:meta, nil, name: "referrer", content: "no-referrer"),
          Html.tag(:title, "#{@page.title} · SolidJobs"),
          Html.tag(:style, Html.trusted(STYLE), nonce: @nonce)
        ])
      end

      def body
        Html.tag(:body, [
          Html.tag(:header, [
            Html.tag(:span, "SolidJobs", class: "brand"),
            Html.tag(:nav, nav, "aria-label": "Dashboard pages"),
            search_form,
            @refresh ? Html.tag(:button, "live", id: "live", type: "button",
                                                 title: "Live refresh every #{@refresh} s; click to pause") : nil,
            Html.tag(:span, "namespace #{SolidJobs.config.namespace} · read-only", class: "meta")
          ]),
          Html.tag(:main, [Html.tag(:h1, @page.heading), @page.body], "data-page": @page.class::TITLE.downcase),
          Html.tag(:footer, "SolidJobs #{SolidJobs::VERSION} · rendered #{Format.time(@page.now_ms)} · " \
                            "times are UTC; missing data is shown as unavailable"),
          @refresh ? Html.tag(:script, Html.trusted(SCRIPT), nonce: @nonce) : nil
        ], "data-refresh": @refresh)
      end

      # GET to /search: a job id opens the job's page, a task name lists its
      # jobs (Pages::Search).
      def search_form
        query = @page.is_a?(Pages::Search) ? @page.query_text : nil
        Html.tag(:form, [
          Html.tag(:input, nil, type: "search", name: "q", value: query, placeholder: "job id or task name",
                                "aria-label": "Job id or task name", maxlength: Pages::Search::QUERY_MAX),
          Html.tag(:button, "Search", type: "submit")
        ], method: "get", action: "#{@base}/search", role: "search", class: "search")
      end

      def nav
        Router::NAV.map do |path, label|
          current = @page.nav_path == path ? "page" : nil
          Html.tag(:a, label, href: "#{@base}#{path}", "aria-current": current)
        end
      end
    end
  end
end
