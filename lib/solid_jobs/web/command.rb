# frozen_string_literal: true

require "solid_jobs/web"
require_relative "../subcommand"
require_relative "../config_file"

module SolidJobs
  class Web
    # `solid-jobs web`: serves the dashboard on its own, with WEBrick
    # through Rack's handler (the rack and webrick gems; Debian: ruby-rack,
    # ruby-webrick). Bound to 127.0.0.1 unless told otherwise. Bad flags
    # exit 64 with a message; TERM or INT stop the server.
    class Command < Subcommand
      UNAVAILABLE = 69
      DEFAULT_PORT = 9292
      DEFAULT_BIND = "127.0.0.1"
      AUTH_ENV = "SOLID_JOBS_WEB_AUTH"
      COMMAND = "solid-jobs web"
      BANNER = "Usage: solid-jobs web [options]\n\nServes the read-only dashboard (SolidJobs::Web)."

      def initialize(argv, out: $stdout, err: $stderr, env: ENV)
        super(argv, out: out, err: err)
        @env = env
      end

      private

      def call(options)
        handler = load_server or return UNAVAILABLE
        serve(handler, options)
        0
      end

      def defaults = {port: DEFAULT_PORT, bind: DEFAULT_BIND, auth: @env[AUTH_ENV], refresh: REFRESH_SECONDS}

      def define_options(parser, options)
        parser.on("-p", "--port PORT", Integer, "Port (default #{DEFAULT_PORT}; 0 picks a free one)") { |v| options[:port] = v }
        parser.on("-b", "--bind ADDRESS", "Address to listen on (default #{DEFAULT_BIND})") { |v| options[:bind] = v }
        parser.on("--basic-auth USER:PASSWORD", "Require HTTP basic auth (or $#{AUTH_ENV}=USER:PASSWORD)") do |v|
          options[:auth] = v
        end
        parser.on("--public-health", "Answer /health without --basic-auth (for probes that cannot authenticate)") do
          options[:public_health] = true
        end
        parser.on("--refresh SECONDS", Integer, "Live refresh interval (default #{REFRESH_SECONDS}; 0 turns it off)") do |v|
          options[:refresh] = v
        end
      end

      def validate(options)
        raise UsageError, "invalid port #{options[:port]} (0-65535)" unless (0..65_535).cover?(options[:port])
        raise UsageError, "invalid refresh #{options[:refresh]} (seconds, 0 or more)" if options[:refresh].negative?

        options[:auth] = parse_auth(options[:auth])
      end

      def parse_auth(value)
        return nil if value.nil?

        user, password = value.split(":", 2)
        if user.to_s.empty? || password.to_s.empty?
          raise UsageError, "basic auth must be USER:PASSWORD, both non-empty (--basic-auth or $#{AUTH_ENV})"
        end

        [user, password]
      end

      # Rack 3 moved the server handlers to the rackup gem; Rack 2 (Debian
      # 12's ruby-rack) has them.
      def load_server
        require "webrick"
        begin
          require "rackup/handler/webrick"
          ::Rackup::Handler::WEBrick
        rescue LoadError
          require "rack"
          require "rack/handler/webrick"
          ::Rack::Handler::WEBrick
        end
      rescue LoadError => e
        @err.puts("solid-jobs web: #{e.message}: serving the dashboard needs the rack and webrick gems " \
                  "(Debian: apt-get install ruby-rack ruby-webrick; or add them to your Gemfile). " \
                  "Inside a Rack application, mount SolidJobs::Web instead.")
        nil
      end

      def serve(handler, options)
        app = Web.new(basic_auth: options[:auth], refresh: options[:refresh], public_health: options[:public_health])
        unless options[:auth] || loopback?(options[:bind])
          @err.puts("solid-jobs web: warning: listening on #{options[:bind]} without --basic-auth: " \
                    "anyone who can reach it sees job names, channels and errors")
        end
        server = nil
        stop = ->(*) { server&.shutdown }
        previous = %w[TERM INT].to_h { |signal| [signal, Signal.trap(signal, &stop)] }
        handler.run(app, Host: options[:bind], Port: options[:port], AccessLog: [],
                         Logger: WEBrick::Log.new($stderr, WEBrick::BasicLog::WARN)) do |s|
          server = s
          port = s.config[:Port]
          host = options[:bind].include?(":") ? "[#{options[:bind]}]" : options[:bind]
          @out.puts("solid-jobs web: listening on http://#{host}:#{port}/ " \
                    "(namespace #{SolidJobs.config.namespace}, read-only#{options[:auth] ? ", basic auth" : ""})")
          @out.flush
        end
      ensure
        previous&.each { |signal, handler_was| Signal.trap(signal, handler_was || "DEFAULT") }
      end

      def loopback?(address)
        %w[127.0.0.1 ::1 localhost].include?(address) || address.start_with?("127.")
      end
    end
  end
end
