package appstore

import "time"

// The App Store Connect API's resources this client reads and writes, in
// their JSON:API shapes (App Store Connect API 4.1: BuildUpload,
// BuildUploadFile, Build, App, BetaGroup), limited to the fields used.

// Build upload states (BuildUploadState).
const (
	uploadAwaiting   = "AWAITING_UPLOAD"
	uploadProcessing = "PROCESSING"
	uploadFailed     = "FAILED"
	uploadComplete   = "COMPLETE"
)

// Asset delivery states of a build upload file (AppMediaAssetState).
const (
	fileAwaiting = "AWAITING_UPLOAD"
	fileFailed   = "FAILED"
)

// A build's processing states (Build.Attributes.processingState).
const (
	buildProcessing = "PROCESSING"
	buildFailed     = "FAILED"
	buildInvalid    = "INVALID"
	buildValid      = "VALID"
)

type linkage struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

type toOne struct {
	Data *linkage `json:"data,omitempty"`
}

type app struct {
	ID         string `json:"id"`
	Attributes struct {
		BundleID string `json:"bundleId"`
		Name     string `json:"name"`
	} `json:"attributes"`
}

type buildUpload struct {
	ID         string `json:"id"`
	Attributes struct {
		ShortVersion string `json:"cfBundleShortVersionString"`
		BuildNumber  string `json:"cfBundleVersion"`
		Platform     string `json:"platform"`
		State        struct {
			State    string        `json:"state"`
			Errors   []StateDetail `json:"errors"`
			Warnings []StateDetail `json:"warnings"`
		} `json:"state"`
	} `json:"attributes"`
	Relationships struct {
		Build toOne `json:"build"`
	} `json:"relationships"`
}

type buildUploadCreate struct {
	Data struct {
		Type       string `json:"type"`
		Attributes struct {
			ShortVersion string `json:"cfBundleShortVersionString"`
			BuildNumber  string `json:"cfBundleVersion"`
			Platform     string `json:"platform"`
		} `json:"attributes"`
		Relationships struct {
			App toOne `json:"app"`
		} `json:"relationships"`
	} `json:"data"`
}

type httpHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// uploadOperation is a DeliveryFileUploadOperation: send bytes
// [offset, offset+length) of the file with method to url, with the
// headers given.
type uploadOperation struct {
	Method         string       `json:"method"`
	URL            string       `json:"url"`
	Length         int64        `json:"length"`
	Offset         int64        `json:"offset"`
	RequestHeaders []httpHeader `json:"requestHeaders"`
	Expiration     *time.Time   `json:"expiration,omitempty"`
	PartNumber     int64        `json:"partNumber"`
}

type buildUploadFile struct {
	ID         string `json:"id"`
	Attributes struct {
		AssetType     string `json:"assetType"`
		FileName      string `json:"fileName"`
		FileSize      int64  `json:"fileSize"`
		UTI           string `json:"uti"`
		DeliveryState struct {
			State  string        `json:"state"`
			Errors []StateDetail `json:"errors"`
		} `json:"assetDeliveryState"`
		UploadOperations []uploadOperation `json:"uploadOperations"`
	} `json:"attributes"`
}

type buildUploadFileCreate struct {
	Data struct {
		Type       string `json:"type"`
		Attributes struct {
			AssetType string `json:"assetType"`
			FileName  string `json:"fileName"`
			FileSize  int64  `json:"fileSize"`
			UTI       string `json:"uti"`
		} `json:"attributes"`
		Relationships struct {
			BuildUpload toOne `json:"buildUpload"`
		} `json:"relationships"`
	} `json:"data"`
}

type checksum struct {
	Hash      string `json:"hash"`
	Algorithm string `json:"algorithm"` // "SHA_256" or "MD5"
}

type buildUploadFileUpdate struct {
	Data struct {
		Type       string `json:"type"`
		ID         string `json:"id"`
		Attributes struct {
			Uploaded  bool `json:"uploaded"`
			Checksums struct {
				File checksum `json:"file"`
			} `json:"sourceFileChecksums"`
		} `json:"attributes"`
	} `json:"data"`
}

type build struct {
	ID         string `json:"id"`
	Attributes struct {
		Version         string `json:"version"`
		ProcessingState string `json:"processingState"`
	} `json:"attributes"`
}

type betaGroup struct {
	ID         string `json:"id"`
	Attributes struct {
		Name string `json:"name"`
	} `json:"attributes"`
}

type one[T any] struct {
	Data T `json:"data"`
}

type many[T any] struct {
	Data []T `json:"data"`
}

type toMany struct {
	Data []linkage `json:"data"`
}
