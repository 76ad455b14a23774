# frozen_string_literal: true

require "minitest/autorun"
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "solid_jobs/web"

# The dashboard's building blocks without Redis: escaping, chart buckets
# and their gaps, SVG output, job lifecycles.
class WebPartsTest < Minitest::Test
  Web = SolidJobs::Web
  NOW = 1_800_000_000_000

  def entry(source, event, at_ms, data = {}, seq: 1)
    {"source" => source, "event" => event, "at_ms" => at_ms, "seq" => seq, "data" => data}
  end

  def test_html_escapes_everything_it_did_not_build
    html = Web::Html.tag(:td, [%(<a href="x">'&'</a>), Web::Html.tag(:b, "ok")], class: %("><script>), title: nil, hidden: true)
    expected = %(<td class="&quot;&gt;&lt;script&gt;" hidden>&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;<b>ok</b></td>)
    assert_equal expected, html
    assert_kind_of Web::Html::Safe, html
    refute_kind_of Web::Html::Safe, "plain"
  end

  def test_series_rates_are_zero_while_sources_report_and_unknown_otherwise
    entries = [
      entry("a", "metrics.interval", NOW - 5_000, {"interval_ms" => 1000, "completed" => 10}, seq: 2),
      entry("a", "metrics.interval", NOW - 4_000, {"interval_ms" => 1000, "completed" => 30}, seq: 3),
      entry("b", "metrics.interval", NOW - 4_500, {"interval_ms" => 1000, "completed" => 5}),
      entry("a", "process.observed", NOW - 30_000, {"cpu_seconds" => 1}, seq: 1),
      entry("a", "job.completed", NOW - 4_000, {"job_id" => "x"}, seq: 4)
    ]
    # Six 10 s buckets; the last one is the current one (it starts now).
    rates = Web::Series.new(entries, now_ms: NOW, window_ms: 60_000, buckets: 6, grace_ms: 11_000).rate("completed")
    assert_equal [nil, nil, 0.0, 0.0, 4.5, 0.0], rates,
                 "unknown before any source reported; 0 while \"a\" reported without metrics; 45 jobs in 10 s"
  end

  def test_series_intervals_spread_and_lost_entries_are_unknown
    entries = [
      entry("a", "process.observed", NOW - 58_000, {}, seq: 1),
      entry("a", "process.observed", NOW - 32_000, {}, seq: 4), # 2 and 3 were lost
      entry("a", "metrics.interval", NOW - 1_000, {"interval_ms" => 20_000, "completed" => 40}, seq: 5)
    ]
    rates = Web::Series.new(entries, now_ms: NOW, window_ms: 60_000, buckets: 6, grace_ms: 11_000).rate("completed")
    # Buckets end at -40, -30, -20, -10, 0 s and now. Entries 2 and 3 (between
    # -58 and -32 s) were lost: unknown. The interval (-21, -1] s holds 40
    # jobs, 2 per s: 1 s of it in the third bucket, 10 s in the fourth, 9 s
    # in the fifth.
    assert_equal [nil, nil, 0.2, 2.0, 1.8, 0.0], rates
  end

  def test_series_derivatives_skip_restarts
    entries = [10, 12, 3, 5].each_with_index.map do |cpu, i|
      entry("n", "process.observed", NOW - 40_000 + i * 10_000, {"cpu_seconds" => cpu})
    end
    values = Web::Series.new(entries, now_ms: NOW, window_ms: 60_000, buckets: 6)
                        .derivative_by_source("process.observed", "cpu_seconds", scale: 100.0).fetch("n")
    assert_equal [20.0, 20.0], values.compact, "12 -> 3 is a restart, not -90 %"
  end

  def test_chart_breaks_lines_at_gaps_and_shades_them
    html = Web::Chart.new(title: "T <x>", series: [{name: "c", values: [1, 2, nil, nil, 3, 4], css: "s1"}],
                          from_ms: NOW - 60_000, to_ms: NOW).to_html
    assert_equal 2, html.scan(/<path d="M/).size, "two segments, not one line across the gap"
    assert_equal 2, html.scan(/class="gap"/).size
    assert_includes html, "<title>T &lt;x&gt;</title>"
    empty = Web::Chart.new(title: "E", series: [{name: "c", values: [nil, nil], css: "s1"}], from_ms: 0, to_ms: 1).to_html
    assert_includes empty, "unavailable: no data in this window"
    refute_includes empty, "<path"
  end

  def test_lifecycle_keeps_listed_fields_only
    entries = [
      entry("n", "job.enqueued", NOW - 100, {"job_id" => "j1", "task" => "T", "channel" => "c", "arguments" => ["secret"]}),
      entry("n", "job.started", NOW - 60, {"job_id" => "j1", "attempt" => 1}),
      entry("n", "job.failed", NOW - 10, {"job_id" => "j1", "error_class" => "E", "error_location" => "t.rb:3",
                                          "message" => "quotes an argument", "failures" => 1})
    ]
    x = Web::Lifecycle.executions(entries).first
    assert_equal ["j1", "T", "c", "failed", 1, 40, 50], [x.id, x.task, x.channel, x.state, x.attempts, x.wait_ms, x.run_ms]
    assert_equal %w[E t.rb:3], [x.error_class, x.error_location]
    refute x.events.any? { |e| e.data.key?("arguments") || e.data.key?("message") }
  end

  def test_formats
    f = Web::Format
    assert_equal ["0 ms", "12 ms", "1.5 s", "150 MiB", "1,234,567", "0.13", "unavailable"],
                 [f.ms(0), f.ms(12), f.ms(1500), f.bytes(150 * 1024 * 1024), f.count(1_234_567), f.number(0.125), f.ms(nil)]
  end
end
