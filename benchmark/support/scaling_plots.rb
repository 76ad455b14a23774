# frozen_string_literal: true

require "fileutils"
require "open3"
require "tmpdir"

module Bench
  # PNG plots of the scaling curves with gnuplot: jobs/s against
  # concurrency, one line per client, one file per scenario; and peak
  # memory against concurrency, one panel per scenario, in one file.
  # Without gnuplot the plots are skipped (a note, not a failure).
  class ScalingPlots
    SIZE = "900,560"
    PANEL_WIDTH = 600
    PANEL_HEIGHT = 450

    def initialize(cases, dir, prefix:)
      @cases = cases
      @dir = dir
      @prefix = prefix
    end

    # Paths written; [] (with a printed note) when gnuplot is missing or
    # fails.
    def write
      terminal = png_terminal or return skip("gnuplot not found; no plots written")

      FileUtils.mkdir_p(@dir)
      Dir.mktmpdir("plots") do |data_dir|
        paths = scenarios.map { |scenario| plot(terminal, "#{@prefix}-#{scenario}.png", throughput_script(scenario, data_dir)) }
        paths << plot(terminal, "#{@prefix}-memory.png", memory_script(data_dir), size: memory_size)
        paths.compact
      end
    end

    private

    def scenarios = @cases.map(&:scenario).uniq
    def clients = @cases.map(&:client).uniq
    def concurrencies = @cases.map(&:concurrency).uniq.sort

    # pngcairo draws antialiased lines; Debian's gnuplot-nox has it, other
    # builds may have only the libgd png terminal.
    def png_terminal
      %w[pngcairo png].find do |terminal|
        _, status = Open3.capture2e("gnuplot", "-e", "set terminal #{terminal}")
        status.success?
      rescue SystemCallError
        return nil
      end
    end

    def skip(note)
      puts "Plots: #{note}"
      []
    end

    def plot(terminal, name, script, size: SIZE)
      path = File.join(@dir, name)
      out, status = Open3.capture2e("gnuplot", stdin_data: "set terminal #{terminal} size #{size}\nset output '#{path}'\n#{script}")
      return path if status.success? && File.exist?(path)

      puts "Plots: gnuplot failed for #{name}: #{out.scrub.lines.last(3).join.strip}"
      nil
    end

    # One row per concurrency, one column per client; NaN where a case is
    # missing or was not measured (gnuplot leaves a gap).
    def data_file(data_dir, name, scenario)
      path = File.join(data_dir, name)
      File.write(path, concurrencies.map do |c|
        [c, *clients.map { |client| yield(@cases.find { |r| r.scenario == scenario && r.client == client && r.concurrency == c }) }].join(" ")
      end.join("\n") + "\n")
      path
    end

    def value(result)
      result&.measured? ? yield(result) : "NaN"
    end

    def plot_lines(path)
      clients.each_with_index.map { |client, i| "'#{path}' using 1:#{i + 2} with linespoints lw 2 pt 7 title '#{client}'" }.join(", ")
    end

    def axes
      "set logscale x 2\nset xtics (#{concurrencies.join(", ")})\nset xrange [#{concurrencies.first * 0.8}:#{concurrencies.last * 1.25}]\n" \
        "set grid\nset key outside right top\nset xlabel 'concurrency (threads, Ractors or processes)'\n"
    end

    def throughput_script(scenario, data_dir)
      path = data_file(data_dir, "#{scenario}.dat", scenario) { |r| value(r, &:jobs_per_second) }
      rates = @cases.select { |r| r.scenario == scenario && r.measured? }.map(&:jobs_per_second)
      # noop spans an order of magnitude between clients: log scale keeps the
      # slow lines readable.
      log = rates.any? && rates.min.positive? && rates.max / rates.min > 10
      "#{axes}set title '#{scenario}: jobs/s (median) by concurrency'\nset ylabel 'jobs/s#{" (log scale)" if log}'\n" \
        "#{log ? "set logscale y\n" : "set yrange [0:*]\n"}plot #{plot_lines(path)}\n"
    end

    # Two panels a row.
    def memory_size = "#{PANEL_WIDTH * [scenarios.size, 2].min},#{PANEL_HEIGHT * ((scenarios.size + 1) / 2)}"

    def memory_script(data_dir)
      rows = (scenarios.size + 1) / 2
      panels = scenarios.map do |scenario|
        path = data_file(data_dir, "#{scenario}-memory.dat", scenario) { |r| value(r) { |c| c.median_run.peak_pss_mb.round(1) } }
        "set title '#{scenario}: peak PSS, workers + servers (MB)'\nplot #{plot_lines(path)}\n"
      end
      "set size 1,1\nset multiplot layout #{rows},#{[scenarios.size, 2].min}\n#{axes}set yrange [0:*]\nset ylabel 'MB'\n" \
        "set key inside left top\n#{panels.join}unset multiplot\n"
    end
  end
end
