# frozen_string_literal: true

module SolidJobs
  class Web
    # Paths to pages. Every page answers at its path (HTML) and at the same
    # path with ".json" (the same data, for scripts and monitoring); the
    # overview's JSON is /overview.json.
    module Router
      Route = Struct.new(:page_class, :params, :json)

      # A job id as the keyspace allows it (UUIDs, or ids a producer chose):
      # anything else cannot name a job, and is a 404.
      JOB_ID = %r{\A/executions/([A-Za-z0-9_.:-]{1,128}?)(\.json)?\z}

      PAGES = {
        "/" => Pages::Overview,
        "/channels" => Pages::Channels,
        "/executions" => Pages::Executions,
        "/nodes" => Pages::Nodes,
        "/resources" => Pages::Resources,
        "/redis" => Pages::RedisHealth,
        "/telemetry" => Pages::Telemetry,
        "/recurring" => Pages::Recurring,
        "/flow" => Pages::Flow,
        "/archive" => Pages::Archive
      }.freeze

      # The navigation, in order: [path, label].
      NAV = PAGES.map { |path, page| [path, page::TITLE] }.freeze

      module_function

      def match(path)
        path = path.chomp("/") unless path == "/"
        return Route.new(Pages::Overview, {}, true) if path == "/overview.json"
        if (m = JOB_ID.match(path))
          return Route.new(Pages::Execution, {id: m[1]}, !m[2].nil?)
        end

        json = path.end_with?(".json")
        # The search box's target: not a page of the navigation.
        return Route.new(Pages::Search, {}, json) if %w[/search /search.json].include?(path)

        page = PAGES[json ? path.delete_suffix(".json") : path]
        page && !(json && path == "/.json") ? Route.new(page, {}, json) : nil
      end
    end
  end
end
