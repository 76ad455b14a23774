# frozen_string_literal: true

require "json"
require "time"
require_relative "subcommand"

module SolidJobs
  # `solid-jobs channel pause NAME [--by WHO] | resume NAME | list [--json]`:
  # pauses and resumes channels (SolidJobs::Channels; docs/flow-control.md)
  # and lists the app's channels with their depth and pause state. Exit 0;
  # 1 when the backend does not answer or cannot pause the channel
  # (SolidEngine); 64 on usage.
  class ChannelCommand < Subcommand
    FAILED = 1
    COMMAND = "solid-jobs channel"
    ACTIONS = %w[pause resume list].freeze
    BANNER = "Usage: solid-jobs channel pause NAME [--by WHO] [options]\n" \
             "       solid-jobs channel resume NAME [options]\n" \
             "       solid-jobs channel list [--json] [options]\n\n" \
             "Pauses a channel (every node stops claiming from it at its next claim; jobs stay ready),\n" \
             "resumes it (idle nodes wake at once), or lists the channels with their depth and pause state."
    FAILURES = {Backends::NotSupported => FAILED, ConnectionError => FAILED, BackendError => FAILED}.freeze

    private

    # The action, then the channel name for pause and resume, come first.
    def parse
      @action = @argv.shift
      help(parser) if %w[-h --help].include?(@action)
      raise UsageError, "expected a subcommand: #{ACTIONS.join(", ")}" unless ACTIONS.include?(@action)

      if @action != "list"
        @channel = @argv.shift
        raise UsageError, "#{@action} needs a channel name" if @channel.nil? || @channel.start_with?("-")
      end
      super
    end

    def define_options(parser, options)
      parser.on("--by WHO", "pause: who paused it, shown by list and the dashboard (default: $USER)") do |v|
        options[:by] = v
      end
      parser.on("--json", "list: one JSON array of the channels") { options[:json] = true }
    end

    def validate(options)
      raise UsageError, "--by goes with pause" if options[:by] && @action != "pause"
      raise UsageError, "--json goes with list" if options[:json] && @action != "list"
      return if @channel.nil? || @channel.match?(Configuration::CHANNEL_NAME)

      raise UsageError, "invalid channel name #{@channel.inspect}: use 1-100 characters from A-Z a-z 0-9 _ - ."
    end

    def call(options)
      case @action
      when "pause"
        changed = Channels.pause(@channel, by: options.fetch(:by) { ENV.fetch("USER", nil) })
        @out.puts(changed ? "channel #{@channel} paused" : "channel #{@channel} was already paused")
      when "resume"
        @out.puts(Channels.resume(@channel) ? "channel #{@channel} resumed" : "channel #{@channel} was not paused")
      else
        list(options)
      end
      0
    end

    def failure_message(error) = "#{error.class}: #{error.message}"

    def list(options)
      rows = Catalog.new.channels
      return @out.puts(JSON.generate(rows)) if options[:json]
      return @out.puts("no channels") if rows.empty?

      header = %w[NAME BACKEND DEPTH STATE]
      lines = rows.map do |r|
        p = r["paused"]
        state = p ? "paused since #{Time.at(p["paused_ms"] / 1000.0).utc.iso8601}#{" by #{p["by"]}" if p["by"]}" : "-"
        state = "unavailable: #{r["unavailable"]}" if r["unavailable"]
        [r["name"], r["backend"].to_s, r["depth"]&.to_s || "?", state]
      end
      widths = header.each_index.map { |i| ([header] + lines).map { |l| l[i].size }.max }
      ([header] + lines).each { |l| @out.puts(l.each_with_index.map { |v, i| v.ljust(widths[i]) }.join("  ").rstrip) }
    end
  end
end
