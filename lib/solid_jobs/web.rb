# frozen_string_literal: true

require "securerandom"
require "json"
require "openssl"
require "uri"
require "solid_jobs"
require "solid_jobs/web/html"
require "solid_jobs/web/format"
require "solid_jobs/web/chart"
require "solid_jobs/web/series"
require "solid_jobs/web/lifecycle"
require "solid_jobs/web/snapshot"
require "solid_jobs/web/layout"
require "solid_jobs/web/page"
require "solid_jobs/web/pages/overview"
require "solid_jobs/web/pages/channels"
require "solid_jobs/web/pages/executions"
require "solid_jobs/web/pages/execution"
require "solid_jobs/web/pages/nodes"
require "solid_jobs/web/pages/resources"
require "solid_jobs/web/pages/redis_health"
require "solid_jobs/web/pages/telemetry"
require "solid_jobs/web/pages/recurring"
require "solid_jobs/web/pages/flow"
require "solid_jobs/web/pages/archive"
require "solid_jobs/web/pages/search"
require "solid_jobs/web/pages/not_found"
require "solid_jobs/web/router"
require "solid_jobs/web/metrics"
require "solid_jobs/web/health"

module SolidJobs
  # The dashboard: a read-only Rack application with no dependency beyond
  # the standard library (it speaks the Rack protocol; the rack gem is
  # needed only to serve it standalone, `solid-jobs web`).
  #
  #   # Rails (the host application authenticates):
  #   mount SolidJobs::Web => "/jobs"
  #   # Rack, with basic auth:
  #   run SolidJobs::Web.new(basic_auth: ["admin", ENV.fetch("JOBS_PASSWORD")])
  #
  # It only reads: GET and HEAD; anything else is 405. It never renders job
  # arguments (pages pick the fields they show; see Snapshot). Every page is
  # also JSON (`/channels.json`), and pages refresh themselves with a small
  # script allowed by a per-response CSP nonce.
  class Web
    REFRESH_SECONDS = 5

    class << self
      # `SolidJobs::Web` itself is a Rack app (the default instance), so it
      # can be mounted as is.
      def call(env) = default.call(env)
      def default = @default ||= new
    end

    # basic_auth: [user, password] or nil (the host authenticates).
    # refresh: seconds between live refreshes; nil or 0 turns them off.
    # snapshot: how a request reads data (tests pass their own).
    # public_health: answer /health without basic auth (Web::HealthEndpoint).
    def initialize(basic_auth: nil, refresh: REFRESH_SECONDS, snapshot: Snapshot, public_health: false)
      if basic_auth && (basic_auth.size != 2 || basic_auth.any? { |part| part.to_s.empty? })
        raise ArgumentError, "basic_auth must be [user, password], both non-empty"
      end

      @basic_auth = basic_auth&.map { |part| part.to_s.dup.freeze }&.freeze
      @refresh = refresh.to_i.positive? ? refresh.to_i : nil
      @snapshot = snapshot
      @public_health = public_health ? true : false
      @health = HealthEndpoint.new
    end

    def call(env)
      health = HealthEndpoint.path?(env["PATH_INFO"])
      return unauthorized unless (health && @public_health) || authorized?(env)

      method = env["REQUEST_METHOD"]
      return method_not_allowed unless %w[GET HEAD].include?(method)

      response = respond(env)
      response[2] = [] if method == "HEAD"
      response
    rescue StandardError => e
      # Reads already turn into "unavailable"; this is a bug in a page.
      Log.error("dashboard: #{env["PATH_INFO"]}: #{e.class}: #{e.message}\n#{Array(e.backtrace).first(10).join("\n")}")
      plain(500, "Internal error (#{e.class}); see the server log.")
    end

    private

    def respond(env)
      path = env["PATH_INFO"].to_s
      path = "/" if path.empty?
      return metrics if path.chomp("/") == Metrics::PATH
      return json(*@health.call) if HealthEndpoint.path?(path)

      route = Router.match(path) or return not_found(env, path)

      snapshot = @snapshot.new
      page = route.page_class.new(snapshot, route.params.merge(query: query(env)), base: base(env))
      if !route.json && page.respond_to?(:redirect) && (to = page.redirect)
        redirect("#{base(env)}#{to}")
      elsif route.json
        json(page.status, page.to_h)
      else
        nonce = SecureRandom.base64(18)
        html(page.status, Layout.new(env, page, nonce: nonce, refresh: @refresh).to_html, nonce)
      end
    end

    # Prometheus text (Metrics): always 200, so a scraper reads
    # solid_jobs_up 0 rather than a failed scrape when Redis is down.
    def metrics
      metrics = Metrics.new
      body = metrics.render
      Log.warn("dashboard: /metrics incomplete: #{metrics.error}") if metrics.error
      [200, safe_headers(Metrics::CONTENT_TYPE, body, nil), [body]]
    end

    def not_found(env, path)
      nonce = SecureRandom.base64(18)
      page = Pages::NotFound.new(nil, {path: path}, base: base(env))
      html(404, Layout.new(env, page, nonce: nonce, refresh: nil).to_html, nonce)
    end

    def base(env) = env["SCRIPT_NAME"].to_s.chomp("/")

    # Query parameters (the search box, the archive's filters and pages):
    # the first value of each name, from a bounded query string; a
    # malformed one counts as none.
    QUERY_MAX = 2048

    def query(env)
      raw = env["QUERY_STRING"].to_s
      return {} if raw.empty? || raw.bytesize > QUERY_MAX

      URI.decode_www_form(raw).each_with_object({}) { |(k, v), all| all[k] ||= v.scrub }
    rescue ArgumentError
      {}
    end

    # The search box found a job: its page, by a GET the browser follows.
    def redirect(location)
      status, headers, body = plain(303, "See #{location}")
      headers["location"] = location
      [status, headers, body]
    end

    # Both parts are always compared (`&`, not `&&`), so the time taken
    # does not tell which one was wrong.
    def authorized?(env)
      return true unless @basic_auth

      header = env["HTTP_AUTHORIZATION"].to_s
      return false unless header.start_with?("Basic ")

      # unpack1("m") is what Base64.decode64 does, without the base64 library:
      # a bundled gem since Ruby 3.4, so not loadable under Bundler unless
      # an app lists it.
      user, password = header.delete_prefix("Basic ").unpack1("m").split(":", 2)
      secure_equal?(user.to_s, @basic_auth[0]) & secure_equal?(password.to_s, @basic_auth[1])
    end

    # Compares digests so neither the length nor the content leaks through
    # timing.
    def secure_equal?(given, expected)
      OpenSSL.fixed_length_secure_compare(OpenSSL::Digest::SHA256.digest(given), OpenSSL::Digest::SHA256.digest(expected))
    end

    def unauthorized
      status, headers, body = plain(401, "Authentication required.")
      headers["www-authenticate"] = %(Basic realm="SolidJobs", charset="UTF-8")
      [status, headers, body]
    end

    def method_not_allowed
      status, headers, body = plain(405, "Method not allowed: the dashboard is read-only (GET, HEAD).")
      headers["allow"] = "GET, HEAD"
      [status, headers, body]
    end

    def html(status, body, nonce)
      [status, safe_headers("text/html; charset=utf-8", body, nonce), [body]]
    end

    def json(status, data)
      body = JSON.generate(data)
      [status, safe_headers("application/json; charset=utf-8", body, nil), [body]]
    end

    def plain(status, text)
      body = "#{text}\n"
      [status, safe_headers("text/plain; charset=utf-8", body, nil), [body]]
    end

    # Every response carries them, errors included. Nothing loads from
    # anywhere but this response: the style sheet and the refresh script
    # are inline and carry the nonce; charts are inline SVG. Forms may only
    # submit to the dashboard itself (`form-action 'self'`): the search box
    # and the archive's filters, both GET, since there is no write path.
    def safe_headers(content_type, body, nonce)
      source = nonce ? "'nonce-#{nonce}'" : "'none'"
      {
        "content-type" => content_type,
        "content-length" => body.bytesize.to_s,
        "content-security-policy" => "default-src 'none'; script-src #{source}; style-src #{source}; img-src data:; " \
                                     "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        "x-content-type-options" => "nosniff",
        "x-frame-options" => "DENY",
        "referrer-policy" => "no-referrer",
        "cache-control" => "no-store"
      }
    end
  end
end
